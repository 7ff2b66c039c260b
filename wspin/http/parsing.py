"""A connection's requests as llhttp parses them: the per-request state, the limits checked as
each part arrives (head size, Host, Content-Length, the body's size and the body budget,
``Expect``), and each whole request handed on to be answered in order.

A body comes framed by its Content-Length only: a request with ``Transfer-Encoding`` is
answered 411 Length Required (RFC 9112 §6.3 lets a server require the length; the API server
and every probe send it, or no body). So no chunk or trailer is ever parsed: llhttp hands
trailer fields to the same callback as headers, after the head limit has stopped counting.

A body's progress is judged by its recent rate: each byte pays for ``1/min_body_rate``
seconds, with at most ``RATE_WINDOW`` in hand (``behind``), so a burst followed by a trickle
falls behind within the window while a body that moves never does.

``Parsing`` is the half of ``wspin.http.connection.Connection`` that llhttp calls back; the
other half (transport, TLS, flow control, answers, closing) is the connection itself, which
provides the abstract methods below.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections import deque

import httptools

from wspin.http.answers import CONTINUE, parser_problem
from wspin.http.limits import (
    BODY_STALL,
    RATE_WINDOW,
    SMALL_BODY_BYTES,
    SMALL_BODY_SHARE,
    ConnectionLimits,
)
from wspin.http.messages import Request
from wspin.http.pool import BODY, HEAD, IDLE, Pool

_OTHER, _HOST, _CONTENT_TYPE, _CONTENT_ENCODING, _CONTENT_LENGTH, _EXPECT, _TRANSFER_ENCODING = (
    range(7)
)
_READ = {
    b"host": _HOST,
    b"content-type": _CONTENT_TYPE,
    b"content-encoding": _CONTENT_ENCODING,
    b"content-length": _CONTENT_LENGTH,
    b"expect": _EXPECT,
    b"transfer-encoding": _TRANSFER_ENCODING,
}
_HEADERS = {
    **_READ,
    **{name.title(): field for name, field in _READ.items()},
    **dict.fromkeys((b"User-Agent", b"Accept", b"Accept-Encoding"), _OTHER),
}
"""The header fields the server reads, as the API server's Go client spells them (canonical)
and in lower case, and the other fields it sends: most fields are found without a copy in
lower case, and every other one is passed over with one more lookup."""

Queued = tuple[Request, bool, bool]
"""A request waiting for its answer: (request, keep the connection, HTTP/1.0)."""


class Stop(Exception):
    """Raised inside a parser callback once the connection has been answered for good: it
    stops llhttp from parsing the rest of the data."""


class Parsing(ABC):
    """llhttp's callbacks and the request they build; see the module docstring."""

    # Kept by the connection.
    _server: Pool
    _loop: asyncio.AbstractEventLoop
    _limits: ConnectionLimits
    _parser: httptools.HttpRequestParser
    _backlog: deque[Queued]
    _scheduled: bool
    _writing_paused: bool
    _turn: int
    transport: asyncio.Transport | None
    phase: int
    deadline: float
    closing: bool
    _reading_paused: bool

    # -- provided by the connection ---------------------------------------------------------

    @abstractmethod
    def _answer(self, request: Request, keep_alive: bool, http10: bool) -> None:
        """Answer ``request`` now."""

    @abstractmethod
    def _refuse(self, status: int, reason: str) -> None:
        """Answer ``status`` and end the connection."""

    @abstractmethod
    def _send(self, data: bytes) -> None:
        """Write ``data`` to the client (through TLS when the port has it)."""

    @abstractmethod
    def _client_done(self) -> None:
        """The client sends no more."""

    @abstractmethod
    def _next_turn(self) -> None:
        """Answer the requests waiting in the backlog."""

    @abstractmethod
    def _pace(self) -> None:
        """Pause or resume reading as the backlog and the client's reading require."""

    @abstractmethod
    def _release_body(self) -> None:
        """Let go of the body held, in the pool's budget too."""

    @abstractmethod
    def _receiving(self) -> None:
        """Tell the pool a body is on its way."""

    @abstractmethod
    def _waiting(self) -> None:
        """Tell the pool the connection waits on its client."""

    @abstractmethod
    def _make_room(self, size: int, room: int) -> bool:
        """``Pool.make_room`` for this connection's body."""

    # -- llhttp's callbacks -----------------------------------------------------------------

    def _new_requests(self) -> None:
        self._completed = 0
        """Requests parsed whole on this connection."""
        self._head_bytes = 0
        self._url = b""
        self._content_type = b""
        self._content_encoding: bytes | None = None
        self._expect: bytes | None = None
        self._hosts = 0
        self._chunked = False
        self._declared = 0
        """The Content-Length of the request being parsed (0 when absent)."""
        self._body: list[bytes] = []
        self.body_bytes = 0
        self.body_started = 0.0
        self.paid_until = 0.0
        """The time up to which the body's bytes, at ``min_body_rate``, pay for its wait."""
        self._now = 0.0
        """The event loop's clock at the start of the read being parsed."""

    def _feed(self, data: bytes | memoryview) -> None:
        self._turn = 0
        # One clock reading per read: every deadline and rate the callbacks set is from it.
        self._now = self._loop.time()
        completed = self._completed
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as err:
            if not isinstance(err.__context__, Stop):
                raise
        except httptools.HttpParserUpgrade:
            # Nothing after the upgrade request is HTTP/1.1: close once it is answered.
            self._client_done()
        except httptools.HttpParserError as err:
            self._refuse(400, f"malformed HTTP request ({parser_problem(err)})")
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
        if self._backlog or self._writing_paused or self._reading_paused:
            if self._backlog and not self._scheduled and not self.closing:
                self._scheduled = True
                self._loop.call_soon(self._next_turn)
            self._pace()

    def on_message_begin(self) -> None:
        self.phase = HEAD
        self.deadline = self._now + self._limits.header_timeout
        self._head_bytes = 0
        self._url = b""
        self._content_type = b""
        self._content_encoding = None
        self._expect = None
        self._hosts = 0
        self._chunked = False
        self._declared = 0

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        field = _HEADERS.get(name)
        if field is None:
            field = _READ.get(name.lower())
        if not field:
            return
        if field == _HOST:
            self._hosts += 1
        elif field == _CONTENT_TYPE:
            self._content_type = value
        elif field == _CONTENT_ENCODING:
            self._content_encoding = value
        elif field == _CONTENT_LENGTH:
            # llhttp has checked the digits and refuses a second, different length.
            limit = self._limits.max_body_bytes
            self._declared = int(value)
            if self._declared > limit:
                self._refuse(413, f"body of {self._declared} bytes exceeds {limit}")
                raise Stop
        elif field == _EXPECT:
            self._expect = value.strip().lower()
        else:
            self._chunked = True

    def on_headers_complete(self) -> None:
        self.phase = BODY
        now = self._now
        self.deadline = now + self._limits.body_timeout
        self.body_started = self.paid_until = now
        self._receiving()
        parser = self._parser
        if self._chunked:
            self._refuse(411, "send the body with a Content-Length; Transfer-Encoding is refused")
            raise Stop
        if self._hosts == 1 and self._expect is None:
            return
        version = parser.get_http_version()
        if self._hosts != 1 and version == "1.1":
            # RFC 9112 §3.2: exactly one Host in an HTTP/1.1 request, else 400.
            self._refuse(400, f"an HTTP/1.1 request needs one Host header, got {self._hosts}")
            raise Stop
        if self._expect is not None and version == "1.1":
            self._expect_continue()  # an HTTP/1.0 expectation is ignored (RFC 9110 §10.1.1)

    def _expect_continue(self) -> None:
        """``100 Continue`` only when the body will be read: a known path and room in the body
        budget for its declared length; else the final answer now, and the connection ends.
        Not while an earlier answer is still to be sent: an interim answer must follow it (the
        client sends the body after its own wait)."""
        if self._expect != b"100-continue":
            self._refuse(417, "only the 100-continue expectation is supported")
            raise Stop
        server = self._server
        path = self._path()
        if path not in server.routes:
            self._refuse(404, f"no endpoint at {path[:80]!r}")
            raise Stop
        room = self._room(self._declared)
        if server.buffered + self._declared > room and not self._make_room(self._declared, room):
            self._refuse(503, "too many request bodies in flight; retry")
            raise Stop
        if not self._backlog and self.transport is not None:
            self._send(CONTINUE)

    def _room(self, held: int) -> int:
        """The body budget a body of ``held`` bytes may fill: all of it for a small body, all
        but the share kept for small ones for a larger body."""
        budget = self._limits.max_buffered_body_bytes
        return budget if held <= SMALL_BODY_BYTES else budget - budget // SMALL_BODY_SHARE

    def on_body(self, chunk: bytes) -> None:
        size = len(chunk)
        limits = self._limits
        server = self._server
        held = self.body_bytes + size
        if held > limits.max_body_bytes:
            self._refuse(413, f"body exceeds {limits.max_body_bytes} bytes")
            raise Stop
        if server.buffered + size > limits.max_buffered_body_bytes or held > SMALL_BODY_BYTES:
            room = self._room(held)
            if server.buffered + size > room and not self._make_room(size, room):
                self._refuse(503, "too many request bodies in flight; retry")
                raise Stop
        self._body.append(chunk)
        self.body_bytes = held
        server.buffered += size
        now = self._now
        self.paid_until = min(
            max(self.paid_until, now - RATE_WINDOW) + size / limits.min_body_rate,
            now + RATE_WINDOW,
        )

    def behind(self, now: float) -> bool:
        """A body in progress whose bytes, at ``min_body_rate``, do not pay for the time since
        its headers, counting at most ``RATE_WINDOW`` of bytes sent earlier."""
        return self.phase == BODY and not self.closing and self.paid_until < now

    def stalled(self, now: float) -> bool:
        """Behind the rate, and past the ``BODY_STALL`` every body is given: one the body
        budget sheds."""
        return self.behind(now) and now - self.body_started >= BODY_STALL

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
        self.deadline = self._now + self._limits.idle_timeout
        if self._backlog or self._writing_paused or self._turn >= self._limits.max_pipelined:
            # Waits on the server, not the client: it joins the waiting connections when its
            # backlog is answered (``_next_turn``).
            self._backlog.append((request, keep_alive, http10))
        else:
            self._waiting()
            self._answer(request, keep_alive, http10)
        if not keep_alive or self.closing:
            raise Stop  # what follows is not a request on this connection

    def _path(self) -> str:
        url = self._url
        cut = url.find(b"?")
        return (url if cut < 0 else url[:cut]).decode("latin-1")
