"""The admission port's HTTP/1.1 server: one asyncio protocol per connection, llhttp parsing.

Every pod creation in the cluster waits on this server (``failurePolicy: Fail``), and every
pod in the cluster can reach its port, so it does the least a correct HTTP/1.1 server can:
httptools (Node.js's llhttp) parses, and a complete request is answered synchronously inside
``data_received`` — the endpoints are pure functions, so there is no task, no request object
and no middleware chain per review, and pipelined requests are answered in order.

Each connection has one deadline, set per phase as Go's ``http.Server`` does, and a sweep
closes the connections past theirs:

- header: from the end of the TLS handshake, or the first byte of a request, to the end of its
  headers;
- body: from the end of the headers to the last byte of the body;
- idle: between requests, longer than the API server's own idle timeout, so the server never
  closes a connection the API server is about to reuse.

Memory is bounded per connection (headers ``MAX_HEAD_BYTES``, body ``MAX_BODY_BYTES``, the
TLS read buffer, and reading pauses while answers wait to be sent) and across connections
(the connection cap, and ``ConnectionLimits.max_buffered_body_bytes`` of bodies held at
once). A connection past a deadline is aborted without a TLS close handshake: a client that
stopped sending usually stopped reading too.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextlib
import logging
import socket
import ssl
import time
from collections.abc import Mapping
from email.utils import formatdate
from typing import Final

import httptools

from webhook.http import MAX_BODY_BYTES, Endpoint, Reply, Request, error_reply
from wspin.core.logs import fields
from wspin.http.limits import TLS_READ_BUFFER, ConnectionLimits

log = logging.getLogger("wspin.webhook")

MAX_HEAD_BYTES: Final = 64 * 1024
"""Request line plus headers: the API server sends a few hundred bytes. A head is refused once
more than this has arrived without its end, so the memory a head holds stays under this plus
one read."""

_REASONS: Final = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}

_CLOSE: Final = b"Connection: close\r\n"
_KEEP_ALIVE: Final = b"Connection: keep-alive\r\n"

_IDLE, _HEAD, _BODY = 0, 1, 2
"""A connection's phase: which deadline applies."""


class _Stop(Exception):
    """Raised inside a parser callback once the connection has been answered for good: it
    stops llhttp from parsing the rest of the data."""


class _Date:
    """The ``Date`` header, formatted once per second."""

    second = -1
    header = b""

    @classmethod
    def now(cls) -> bytes:
        second = int(time.time())
        if second != cls.second:
            cls.second = second
            cls.header = b"Date: " + formatdate(second, usegmt=True).encode() + b"\r\n"
        return cls.header


class Listener:
    """The listening socket, its open connections, their deadlines and the body budget."""

    def __init__(self, routes: Mapping[str, Endpoint], limits: ConnectionLimits) -> None:
        self.routes = routes
        self.limits = limits
        self.connections: set[AdmissionProtocol] = set()
        self.refused = 0
        self.buffered = 0
        self.bound_port = 0
        self.draining = False
        self._drained = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None) -> int:
        asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER
        loop = asyncio.get_running_loop()

        def protocol() -> AdmissionProtocol:
            return AdmissionProtocol(self, loop)

        if ssl_context is None:
            self._server = await loop.create_server(
                protocol, host, port, backlog=1024, reuse_address=True
            )
        else:
            self._server = await loop.create_server(
                protocol,
                host,
                port,
                backlog=1024,
                reuse_address=True,
                ssl=ssl_context,
                ssl_handshake_timeout=self.limits.header_timeout,
                ssl_shutdown_timeout=self.limits.header_timeout,
            )
        for sock in self._server.sockets:
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                self.bound_port = int(sock.getsockname()[1])
                break
        self._sweeper = asyncio.create_task(self._sweep(loop), name="connection-deadlines")
        return self.bound_port

    async def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        """Abort every connection past its deadline, a few times per shortest deadline."""
        limits = self.limits
        interval = min(1.0, limits.header_timeout / 5, limits.body_timeout / 5)
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for connection in [c for c in self.connections if c.deadline < now]:
                connection.expire()

    async def cleanup(self) -> None:
        """Stop accepting; let requests already arriving finish within their deadlines (each
        connection closes once it has answered); then close every connection."""
        if self._server is None:
            return
        self._server.close()
        self.draining = True
        for connection in list(self.connections):
            if connection.phase == _IDLE:
                connection.close()
        if self.connections:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._drained.wait(),
                    max(self.limits.header_timeout, self.limits.body_timeout),
                )
        for connection in list(self.connections):
            connection.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        await self._server.wait_closed()
        self._server = None

    def forget(self, connection: AdmissionProtocol) -> None:
        """A connection has closed."""
        self.connections.discard(connection)
        if self.draining and not self.connections:
            self._drained.set()


class AdmissionProtocol(asyncio.Protocol):
    """One client connection: parse, answer each request whole, keep the deadlines."""

    def __init__(self, listener: Listener, loop: asyncio.AbstractEventLoop) -> None:
        self._listener = listener
        self._loop = loop
        self._limits = listener.limits
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self.phase = _IDLE
        self.deadline = float("inf")
        self._closing = False
        self._head_bytes = 0
        self._completed = 0
        """Requests parsed whole on this connection."""
        self._url = b""
        self._content_type = b""
        self._content_encoding: bytes | None = None
        self._continue = False
        self._body: list[bytes] = []
        self._body_bytes = 0

    # -- connection ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        listener = self._listener
        if len(listener.connections) >= self._limits.max_connections:
            listener.refused += 1
            transport.abort()
            return
        self._transport = transport
        listener.connections.add(self)
        self._arm(_HEAD, self._limits.header_timeout)  # the first request must start soon

    def connection_lost(self, exc: Exception | None) -> None:
        self._listener.forget(self)
        self._release_body()
        self._transport = None

    def pause_writing(self) -> None:
        # A client that sends requests but does not read the answers: stop reading its
        # requests until it does, so the answers waiting to be sent stay bounded.
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        if self._transport is not None and not self._closing:
            self._transport.resume_reading()

    def expire(self) -> None:
        """Past the deadline of the current phase."""
        self.deadline = float("inf")
        if self._transport is not None:
            self._transport.abort()

    def close(self) -> None:
        """Close once the answers written so far are sent."""
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    def _arm(self, phase: int, seconds: float) -> None:
        self.phase = phase
        self.deadline = self._loop.time() + seconds

    # -- parsing ---------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        completed = self._completed
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as err:
            if isinstance(err.__context__, _Stop):
                return
            raise
        except httptools.HttpParserUpgrade:
            self.close()  # any request before the upgrade was answered; nothing else is HTTP
            return
        except httptools.HttpParserError as err:
            self._refuse(400, f"malformed HTTP request ({_parser_problem(err)})")
            return
        if self.phase == _HEAD:
            # Headers incomplete. When no request ended in this read, all of it was this head;
            # otherwise the head began part-way through (pipelined requests, or all the reads
            # that waited while reading was paused, in one), and it is counted from the next.
            if self._completed == completed:
                self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse(431, f"request line and headers exceed {MAX_HEAD_BYTES} bytes")

    def on_message_begin(self) -> None:
        self._arm(_HEAD, self._limits.header_timeout)
        self._head_bytes = 0
        self._url = b""
        self._content_type = b""
        self._content_encoding = None
        self._continue = False

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        lowered = name.lower()
        if lowered == b"content-type":
            self._content_type = value
        elif lowered == b"content-encoding":
            self._content_encoding = value
        elif lowered == b"content-length":
            # llhttp has checked the digits and refuses a second, different length.
            if int(value) > MAX_BODY_BYTES:
                self._refuse(413, f"body of {int(value)} bytes exceeds {MAX_BODY_BYTES}")
                raise _Stop
        elif lowered == b"expect" and value.lower() == b"100-continue":
            self._continue = True

    def on_headers_complete(self) -> None:
        self._arm(_BODY, self._limits.body_timeout)
        if self._continue and self._transport is not None:
            self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, chunk: bytes) -> None:
        size = len(chunk)
        listener = self._listener
        if self._body_bytes + size > MAX_BODY_BYTES:
            self._refuse(413, f"body exceeds {MAX_BODY_BYTES} bytes")
            raise _Stop
        budget = self._limits.max_buffered_body_bytes
        if listener.buffered + size > budget:
            log.warning(
                "request bodies in flight over budget; refusing one",
                extra=fields(budgetBytes=budget, connections=len(listener.connections)),
            )
            self._refuse(503, "too many request bodies in flight; retry")
            raise _Stop
        self._body.append(chunk)
        self._body_bytes += size
        listener.buffered += size

    def on_message_complete(self) -> None:
        self._completed += 1
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        self._release_body()
        url = self._url
        cut = url.find(b"?")
        path = (url if cut < 0 else url[:cut]).decode("latin-1")
        request = Request(
            method=self._parser.get_method().decode("latin-1"),
            path=path,
            content_type=self._content_type.decode("latin-1"),
            content_encoding=(
                None if self._content_encoding is None else self._content_encoding.decode("latin-1")
            ),
            body=body,
        )
        endpoint = self._listener.routes.get(path)
        if endpoint is None:
            reply = error_reply(404, f"no endpoint at {path[:80]!r}")
        else:
            try:
                reply = endpoint(request)
            except Exception:  # an endpoint bug: answer and log, never drop the connection
                log.exception("endpoint failed", extra=fields(path=path[:80]))
                reply = error_reply(500, "internal error in the wspin webhook; see its log")
        # After an Upgrade request the bytes are another protocol: answer it, then close.
        keep_alive = (
            self._parser.should_keep_alive()
            and not self._parser.should_upgrade()
            and not self._listener.draining
        )
        if not keep_alive:
            connection = _CLOSE
        elif self._parser.get_http_version() == "1.0":
            connection = _KEEP_ALIVE  # an HTTP/1.0 client keeps the connection only when told
        else:
            connection = b""
        self._write(reply, connection, request.method != "HEAD")
        if keep_alive:
            self._arm(_IDLE, self._limits.idle_timeout)
        else:
            self.close()
            raise _Stop

    # -- answers ---------------------------------------------------------------------------

    def _write(self, reply: Reply, connection: bytes, with_body: bool = True) -> None:
        """Send ``reply``; ``connection`` is its Connection header line, or empty. An answer
        to HEAD has no body (its Content-Length still says how long the body is), or the
        client would read the body as the start of the next answer."""
        if self._transport is None:
            return
        body = reply.body
        head = b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s%s\r\n" % (
            reply.status,
            _REASONS.get(reply.status, "Unknown").encode(),
            reply.content_type.encode(),
            len(body),
            _Date.now(),
            connection,
        )
        self._transport.write(head + body if with_body else head)

    def _refuse(self, status: int, reason: str) -> None:
        """Answer with ``status`` and close: the rest of this connection's bytes cannot be
        trusted to frame a next request. A parser callback raises ``_Stop`` after it."""
        log.warning("refused HTTP request", extra=fields(status=status, reason=reason))
        self._write(error_reply(status, reason), _CLOSE)
        self._release_body()
        self.close()

    def _release_body(self) -> None:
        self._listener.buffered -= self._body_bytes
        self._body = []
        self._body_bytes = 0


def _parser_problem(err: httptools.HttpParserError) -> str:
    """llhttp's reason (fixed text such as "Invalid header value char"), never the bytes."""
    text = str(err)
    return text.split(":", 1)[-1].strip()[:80] if text else type(err).__name__


async def start(
    routes: Mapping[str, Endpoint],
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None = None,
    limits: ConnectionLimits | None = None,
) -> tuple[Listener, int]:
    """Serve ``routes`` (path → endpoint; the query string is ignored) on host:port (0 = any
    free port); returns the listener (``await listener.cleanup()`` stops it) and the port."""
    listener = Listener(routes, limits or ConnectionLimits())
    bound = await listener.start(host, port, ssl_context)
    return listener, bound
