"""One client connection: TLS, llhttp parsing, answers in order, flow control, lingering close.

httptools (Node.js's llhttp) parses, and a complete request is answered synchronously inside
the read that completed it: the endpoints are pure functions, so there is no task, request
object or middleware chain per request, and pipelined requests are answered in order. At most
``max_pipelined`` per turn of the event loop: the rest wait for the next turn with reading
paused, so a connection pipelining as fast as it can never holds the loop.

Each connection has one deadline, set per phase as Go's ``http.Server`` does, which the
server's sweep enforces: handshake; header (from the handshake's end or a request's first
byte to the end of its headers); body (to its last byte); idle (between requests, longer than
the API server's own); lingering; closing. A client that stops reading its answers gets
``send_timeout`` on top of any of them. A connection past a deadline is aborted without a TLS
close: a client that stopped sending usually stopped reading too.

Memory per connection: the head (``max_head_bytes``), the body (``max_body_bytes``, and its
share of the server's body budget), one read's worth of parsed requests, and answers up to
``write_buffer_bytes`` plus one: past that mark reading and answering pause until the client
reads. No read buffer: reads go to the server's shared one.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
import traceback
from collections import deque
from email.utils import formatdate
from typing import TYPE_CHECKING, Final

import httptools

from wspin.core.logs import fields
from wspin.http.limits import BODY_STALL
from wspin.http.messages import Reply, Request, error_reply
from wspin.http.tls import TlsChannel

if TYPE_CHECKING:
    from wspin.http.server import HttpServer

_REASONS: Final = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    417: "Expectation Failed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}

_CLOSE: Final = b"Connection: close\r\n"
_KEEP_ALIVE: Final = b"Connection: keep-alive\r\n"
_CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"

HANDSHAKE, IDLE, HEAD, BODY, LINGER, CLOSING = range(6)
"""A connection's phase: which deadline applies. The first four wait on the client's next
bytes; the server may close those to admit a new connection at its cap."""

_PART_WAY: Final = {HANDSHAKE: "handshake", HEAD: "header", BODY: "body"}
_NEVER: Final = float("inf")


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


class _Nothing:
    """The callbacks of a closed connection's parser: none."""


_CLOSED: Final = httptools.HttpRequestParser(_Nothing())

Queued = tuple[Request, bool, bool]
"""A request waiting for its answer: (request, keep the connection, HTTP/1.0)."""


class Connection(asyncio.BufferedProtocol):
    """One client connection of ``server``."""

    def __init__(
        self, server: HttpServer, loop: asyncio.AbstractEventLoop, tls: ssl.SSLContext | None
    ) -> None:
        self._server = server
        self._loop = loop
        self._limits = server.limits
        self._parser = httptools.HttpRequestParser(self)
        self._tls_context = tls
        self._tls: TlsChannel | None = None
        """Made with the first byte: a connection that sends nothing holds no TLS session."""
        self.transport: asyncio.Transport | None = None
        self.phase = HANDSHAKE if tls is not None else IDLE
        self.deadline = _NEVER
        self.send_deadline = _NEVER
        """Set while the client is not reading its answers."""
        self.closing = False
        self.queued = 0
        """Answer bytes in the transport's send queue, as last seen."""
        self._backlog: deque[Queued] = deque()
        self._turn = 0
        """Requests answered in this turn of the event loop."""
        self._scheduled = False
        self._writing_paused = False
        self._reading_paused = False
        self._eof = False
        self._lingered = 0
        self._completed = 0
        """Requests parsed whole on this connection."""
        self._head_bytes = 0
        self._url = b""
        self._content_type = b""
        self._content_encoding: bytes | None = None
        self._expect: bytes | None = None
        self._hosts = 0
        self._declared = 0
        """The Content-Length of the request being parsed (0 when absent)."""
        self._body: list[bytes] = []
        self.body_bytes = 0
        self.body_started = 0.0
        self.body_last = 0.0

    # -- connection ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        limits = self._limits
        if not self._server.admit(self):
            self.transport = None
            transport.abort()
            return
        transport.set_write_buffer_limits(high=limits.write_buffer_bytes)
        # The kernel's send queue is memory charged to this process's cgroup too, and Linux
        # grows it to megabytes for a client that does not read: hold it to the same mark.
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, limits.write_buffer_bytes)
        wait = limits.handshake_timeout if self.phase == HANDSHAKE else limits.header_timeout
        self.deadline = self._loop.time() + wait

    def connection_lost(self, exc: Exception | None) -> None:
        self._release_body()
        self._backlog.clear()
        self.transport = None
        self.closing = True
        self._tls = None
        self._tls_context = None
        # The parser holds this protocol's callbacks: drop it, so the connection is freed
        # when it closes rather than at the next (rare, see the webhook's GC tuning)
        # collection of cycles.
        self._parser = _CLOSED
        self._server.forget(self)

    @property
    def answering(self) -> bool:
        """Requests parsed and waiting for their answers."""
        return bool(self._backlog)

    def get_buffer(self, sizehint: int) -> memoryview:
        # asyncio's selector transport fills the buffer and calls buffer_updated() at once,
        # before any other read: the server's one buffer serves every connection.
        return self._server.read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        data = self._server.read_buffer[:nbytes]
        if self.closing:
            if self.phase == LINGER:
                self._discard(data)
            return
        tls = self._tls
        if tls is None:
            if self._tls_context is None:
                self._feed(data)
                return
            tls = self._tls = TlsChannel(self._tls_context)
        try:
            plaintext = tls.receive(data)
        except ssl.SSLError as err:
            self._server.refusals.note(
                "tls", "TLS handshake or record refused", reason=str(err.reason)[:80]
            )
            self.abort()
            return
        if self.phase == HANDSHAKE and tls.established:
            self.phase = IDLE  # the first request's header deadline starts now
            self.deadline = self._loop.time() + self._limits.header_timeout
        self._flush_tls()
        if plaintext:
            self._feed(plaintext)
        if tls.peer_closed and not self._eof:
            self._client_done()

    def _discard(self, data: memoryview) -> None:
        """Lingering: drop what arrives, but notice the client's close_notify."""
        self._lingered += len(data)
        tls = self._tls
        if tls is not None:
            try:
                tls.receive(data)
            except ssl.SSLError:
                self.close()
                return
            if tls.peer_closed:
                self.close()
                return
        if self._lingered > self._limits.linger_bytes:
            self.close()

    def eof_received(self) -> bool:
        self._client_done()
        return True  # the transport closes when close() is called, after the last answer

    def _client_done(self) -> None:
        """The client sends no more: close once what it asked is answered."""
        self._eof = True
        if not self._backlog and self.transport is not None:
            self.close()

    def pause_writing(self) -> None:
        # A client that does not read its answers: stop reading and answering its requests
        # until it does, so the answers waiting to be sent stay bounded; and give it
        # send_timeout to start reading again.
        self._writing_paused = True
        self.send_deadline = self._loop.time() + self._limits.send_timeout
        self._pace()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self.send_deadline = _NEVER
        self._server.account(self)
        if self._backlog and not self._scheduled and not self.closing:
            self._scheduled = True
            self._loop.call_soon(self._next_turn)
        self._pace()

    def _pace(self) -> None:
        """Read only while nothing waits to be answered or sent; lingering always reads."""
        transport = self.transport
        if transport is None:
            return
        pause = self.phase != LINGER and (self._writing_paused or bool(self._backlog))
        if pause != self._reading_paused:
            self._reading_paused = pause
            if pause:
                transport.pause_reading()
            else:
                transport.resume_reading()

    # -- ending ------------------------------------------------------------------------------

    def abort(self) -> None:
        """Drop the connection now, unsent answers and all."""
        self.closing = True
        self._release_body()
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        """Close once the answers written so far are sent; within ``send_timeout``."""
        self.closing = True
        self._backlog.clear()
        self.phase = CLOSING
        self.deadline = self._loop.time() + self._limits.send_timeout
        self._server.stop_waiting(self)
        transport = self.transport
        if transport is not None and not transport.is_closing():
            if self._tls is not None:
                transport.write(self._tls.close_notify())
            transport.close()

    def expire(self, now: float) -> None:
        """Past a deadline: a lingering connection closes, any other is aborted. Clients that
        stop part-way are counted (and logged, rate-limited); an idle one is not news."""
        if self.send_deadline <= now:
            self._server.refusals.note(
                "send-timeout",
                "dropped a connection whose client stopped reading its answers",
                queuedBytes=self.queued,
            )
        elif self.phase in _PART_WAY:
            name = _PART_WAY[self.phase]
            self._server.refusals.note(
                f"{name}-timeout", "dropped a connection that stopped sending", phase=name
            )
        if self.phase == LINGER and self.send_deadline > now:
            self.close()
        else:
            self.abort()

    def _linger(self) -> None:
        """After a refusal that ends the connection: read and discard, for a bounded time and
        size, so the client reads the refusal rather than a reset (RFC 9112 §9.6)."""
        self.closing = True
        self._backlog.clear()
        self._release_body()
        self.phase = LINGER
        self.deadline = self._loop.time() + self._limits.linger_timeout
        self._server.first_to_evict(self)
        if self._eof:
            self.close()
        else:
            self._pace()

    # -- parsing ---------------------------------------------------------------------------

    def _feed(self, data: bytes | memoryview) -> None:
        self._turn = 0
        completed = self._completed
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as err:
            if not isinstance(err.__context__, _Stop):
                raise
        except httptools.HttpParserUpgrade:
            # Nothing after the upgrade request is HTTP/1.1: close once it is answered.
            self._client_done()
        except httptools.HttpParserError as err:
            self._refuse(400, f"malformed HTTP request ({_parser_problem(err)})")
        else:
            if self.phase == HEAD:
                # Headers incomplete. When no request ended in this read, all of it was this
                # head; otherwise the head began part-way through and is counted from the next.
                if self._completed == completed:
                    self._head_bytes += len(data)
                if self._head_bytes > self._limits.max_head_bytes:
                    self._refuse(
                        431,
                        f"request line and headers exceed {self._limits.max_head_bytes} bytes",
                    )
        if self._backlog and not self._scheduled and not self.closing:
            self._scheduled = True
            self._loop.call_soon(self._next_turn)
        self._pace()

    def on_message_begin(self) -> None:
        self.phase = HEAD
        self.deadline = self._loop.time() + self._limits.header_timeout
        self._head_bytes = 0
        self._url = b""
        self._content_type = b""
        self._content_encoding = None
        self._expect = None
        self._hosts = 0
        self._declared = 0

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        lowered = name.lower()
        if lowered == b"host":
            self._hosts += 1
        elif lowered == b"content-type":
            self._content_type = value
        elif lowered == b"content-encoding":
            self._content_encoding = value
        elif lowered == b"content-length":
            # llhttp has checked the digits and refuses a second, different length.
            limit = self._limits.max_body_bytes
            self._declared = int(value)
            if self._declared > limit:
                self._refuse(413, f"body of {self._declared} bytes exceeds {limit}")
                raise _Stop
        elif lowered == b"expect":
            self._expect = value.strip().lower()

    def on_headers_complete(self) -> None:
        server = self._server
        self.phase = BODY
        now = self._loop.time()
        self.deadline = now + self._limits.body_timeout
        self.body_started = self.body_last = now
        server.stop_waiting(self)
        parser = self._parser
        if self._hosts != 1 and parser.get_http_version() == "1.1":
            # RFC 9112 §3.2: exactly one Host in an HTTP/1.1 request, else 400.
            self._refuse(400, f"an HTTP/1.1 request needs one Host header, got {self._hosts}")
            raise _Stop
        if self._expect is not None and parser.get_http_version() == "1.1":
            self._expect_continue()  # an HTTP/1.0 expectation is ignored (RFC 9110 §10.1.1)

    def _expect_continue(self) -> None:
        """``100 Continue`` only when the body will be read: a known path and room in the body
        budget for its declared length; else the final answer now, and the connection ends.
        Not while an earlier answer is still to be sent: an interim answer must follow it (the
        client sends the body after its own wait)."""
        if self._expect != b"100-continue":
            self._refuse(417, "only the 100-continue expectation is supported")
            raise _Stop
        server = self._server
        path = self._path()
        if path not in server.routes:
            self._refuse(404, f"no endpoint at {path[:80]!r}")
            raise _Stop
        budget = self._limits.max_buffered_body_bytes
        if server.buffered + self._declared > budget and not server.make_room(self._declared, self):
            self._refuse(503, "too many request bodies in flight; retry")
            raise _Stop
        if not self._backlog and self.transport is not None:
            self._send(_CONTINUE)

    def on_body(self, chunk: bytes) -> None:
        size = len(chunk)
        limits = self._limits
        server = self._server
        if self.body_bytes + size > limits.max_body_bytes:
            self._refuse(413, f"body exceeds {limits.max_body_bytes} bytes")
            raise _Stop
        if server.buffered + size > limits.max_buffered_body_bytes and not server.make_room(
            size, self
        ):
            self._refuse(503, "too many request bodies in flight; retry")
            raise _Stop
        if not self.body_bytes:
            server.bodies.add(self)
        self._body.append(chunk)
        self.body_bytes += size
        self.body_last = self._loop.time()
        server.buffered += size

    def stalled(self, now: float) -> bool:
        """A body in progress that sent nothing for ``BODY_STALL``, or less than the minimum rate
        on average since its headers."""
        if self.phase != BODY or self.closing or now - self.body_started < BODY_STALL:
            return False
        if now - self.body_last >= BODY_STALL:
            return True
        return self.body_bytes / (now - self.body_started) < self._limits.min_body_rate

    def on_message_complete(self) -> None:
        self._completed += 1
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        self._release_body()
        parser = self._parser
        request = Request(
            method=parser.get_method().decode("latin-1"),
            path=self._path(),
            content_type=self._content_type.decode("latin-1"),
            content_encoding=(
                None if self._content_encoding is None else self._content_encoding.decode("latin-1")
            ),
            body=body,
        )
        # After an Upgrade request the bytes are another protocol: answer it, then close.
        keep_alive = parser.should_keep_alive() and not parser.should_upgrade()
        http10 = parser.get_http_version() == "1.0"
        self.phase = IDLE
        self.deadline = self._loop.time() + self._limits.idle_timeout
        self._server.wait(self)
        if self._backlog or self._writing_paused or self._turn >= self._limits.max_pipelined:
            self._backlog.append((request, keep_alive, http10))
        else:
            self._answer(request, keep_alive, http10)
        if not keep_alive or self.closing:
            raise _Stop  # what follows is not a request on this connection

    def _path(self) -> str:
        url = self._url
        cut = url.find(b"?")
        return (url if cut < 0 else url[:cut]).decode("latin-1")

    # -- answers ---------------------------------------------------------------------------

    def _next_turn(self) -> None:
        """Answer the next ``max_pipelined`` waiting requests; come back next turn for more."""
        self._scheduled = False
        self._turn = 0
        backlog = self._backlog
        limit = self._limits.max_pipelined
        while backlog and self._turn < limit and not self._writing_paused and not self.closing:
            self._answer(*backlog.popleft())
        if self.closing:
            return
        if backlog:
            if not self._writing_paused:
                self._scheduled = True
                self._loop.call_soon(self._next_turn)
        elif self._eof:
            self.close()
            return
        self._pace()

    def _answer(self, request: Request, keep_alive: bool, http10: bool) -> None:
        self._turn += 1
        server = self._server
        endpoint = server.routes.get(request.path)
        if endpoint is None:
            reply = error_reply(404, f"no endpoint at {request.path[:80]!r}")
        else:
            try:
                reply = endpoint(request)
            except Exception as err:  # an endpoint bug: answer and log, never drop the socket
                # The type and the frames, never the message: it can quote the request.
                server.log.error(
                    "endpoint failed",
                    extra=fields(
                        path=request.path[:80],
                        errorType=type(err).__name__,
                        frames="".join(traceback.format_tb(err.__traceback__)),
                    ),
                )
                reply = error_reply(500, "internal error; see the server's log")
        keep = keep_alive and not server.draining
        if not keep:
            connection = _CLOSE
        elif http10:
            connection = _KEEP_ALIVE  # an HTTP/1.0 client keeps the connection only when told
        else:
            connection = b""
        self._write(reply, connection, request.method != "HEAD")
        if not keep:
            self.close()

    def _write(self, reply: Reply, connection: bytes, with_body: bool = True) -> None:
        """Send ``reply``; ``connection`` is its Connection header line, or empty. An answer
        to HEAD has no body (its Content-Length still says how long the body is), or the
        client would read the body as the start of the next answer."""
        body = reply.body
        head = b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s%s\r\n" % (
            reply.status,
            _REASONS.get(reply.status, "Unknown").encode(),
            reply.content_type.encode(),
            len(body),
            _Date.now(),
            connection,
        )
        self._send(head + body if with_body else head)

    def _send(self, data: bytes) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.write(data if self._tls is None else self._tls.send(data))
        self._server.account(self)

    def _flush_tls(self) -> None:
        assert self._tls is not None
        out = self._tls.outgoing()
        if out and self.transport is not None:
            self.transport.write(out)

    def _refuse(self, status: int, reason: str) -> None:
        """Answer with ``status`` and end the connection: the rest of its bytes cannot be
        trusted to frame a next request. A parser callback raises ``_Stop`` after it."""
        self._server.refusals.note(
            str(status), "refused HTTP request", status=status, reason=reason
        )
        while self._backlog and not self.closing:  # earlier requests are answered first
            self._answer(*self._backlog.popleft())
        if self.closing:
            return
        self._write(error_reply(status, reason), _CLOSE)
        self._linger()

    def _release_body(self) -> None:
        if self.body_bytes:
            self._server.buffered -= self.body_bytes
            self._server.bodies.discard(self)
            self.body_bytes = 0
        self._body = []


def _parser_problem(err: httptools.HttpParserError) -> str:
    """llhttp's reason (fixed text such as "Invalid header value char"), never the bytes."""
    text = str(err)
    return text.split(":", 1)[-1].strip()[:80] if text else type(err).__name__
