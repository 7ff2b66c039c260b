"""One client connection: TLS, answers in order, flow control, lingering close; the requests
themselves as llhttp parses them are ``wspin.http.parsing``.

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
import traceback
from collections import deque
from typing import Final

import httptools

from wspin.core.logs import fields
from wspin.http.answers import CLOSE, KEEP_ALIVE, encode
from wspin.http.messages import Reply, Request, error_reply
from wspin.http.parsing import Parsing, Queued
from wspin.http.pool import BODY, CLOSING, HANDSHAKE, HEAD, IDLE, LINGER, PHASE_NAMES, Pool
from wspin.http.tls import TlsChannel

_PART_WAY: Final = {HANDSHAKE: "handshake", HEAD: "header", BODY: "body"}
_NEVER: Final = float("inf")


class _Nothing:
    """The callbacks of a closed connection's parser: none."""


_CLOSED_PARSER: Final = httptools.HttpRequestParser(_Nothing())


class Connection(Parsing, asyncio.BufferedProtocol):
    """One client connection of ``server``, a member of its pool."""

    def __init__(
        self, server: Pool, loop: asyncio.AbstractEventLoop, tls: ssl.SSLContext | None
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
        self.log_lines = float(self._limits.log_burst_lines)
        """Log lines this connection's requests may still cause; the server's sweep refills
        it at ``log_lines_per_second``."""
        self._new_requests()

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
        self._parser = _CLOSED_PARSER
        self._server.forget(self)

    @property
    def phase_name(self) -> str:
        return PHASE_NAMES[self.phase]

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
        if tls.outgoing_bio.pending:  # handshake, session tickets, alerts: rarely after those
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
        self._server.stop_waiting(self)  # it has answers to deliver: not one to close at the cap
        self._pace()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self.send_deadline = _NEVER
        self._server.account(self)
        if self._backlog and not self._scheduled and not self.closing:
            self._scheduled = True
            self._loop.call_soon(self._next_turn)
        elif not self._backlog and not self.closing and self.phase in (IDLE, HEAD):
            self._server.wait(self)
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
        elif not self._writing_paused and self.phase in (IDLE, HEAD):
            self._server.wait(self)  # everything asked is answered: waiting on the client
        self._pace()

    def _answer(self, request: Request, keep_alive: bool, http10: bool) -> None:
        self._turn += 1
        server = self._server
        if self.log_lines >= 1:
            self.log_lines -= 1
        else:
            request.quiet = True
            server.refusals.note(
                "log-budget",
                "a connection's requests are over its log budget: answered without log lines",
                linesPerSecond=self._limits.log_lines_per_second,
            )
        endpoint = server.routes.get(request.path)
        if endpoint is None:
            reply = error_reply(404, f"no endpoint at {request.path[:80]!r}")
        else:
            try:
                reply = endpoint(request)
            except Exception as err:  # an endpoint bug: answer and log, never drop the socket
                # The type and the frames, never the message: it can quote the request.
                if not request.quiet:
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
            connection = CLOSE
        elif http10:
            connection = KEEP_ALIVE  # an HTTP/1.0 client keeps the connection only when told
        else:
            connection = b""
        self._write(reply, connection, request.method != "HEAD")
        if not keep:
            self.close()

    def _write(self, reply: Reply, connection: bytes, with_body: bool = True) -> None:
        self._send(encode(reply, connection, with_body))

    def _send(self, data: bytes) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.write(data if self._tls is None else self._tls.send(data))
        if transport.get_write_buffer_size() != self.queued:
            self._server.account(self)

    def _flush_tls(self) -> None:
        assert self._tls is not None
        out = self._tls.outgoing()
        if out and self.transport is not None:
            self.transport.write(out)

    def _refuse(self, status: int, reason: str) -> None:
        """Answer with ``status`` and end the connection: the rest of its bytes cannot be
        trusted to frame a next request. A parser callback raises ``Stop`` after it."""
        self._server.refusals.note(
            str(status), "refused HTTP request", status=status, reason=reason
        )
        while self._backlog and not self.closing:  # earlier requests are answered first
            self._answer(*self._backlog.popleft())
        if self.closing:
            return
        self._write(error_reply(status, reason), CLOSE)
        self._linger()

    def _release_body(self) -> None:
        self._server.release(self, self.body_bytes)
        self.body_bytes = 0
        self._body = []

    def _receiving(self) -> None:
        self._server.receiving(self)

    def _waiting(self) -> None:
        self._server.wait(self)

    def _make_room(self, size: int, room: int) -> bool:
        return self._server.make_room(size, room, self)
