"""Connection limits for the HTTP(S) servers every pod in the cluster can reach.

aiohttp on its own keeps an idle connection for an hour, waits for a half-sent request body
forever and accepts as many connections as there are file descriptors, so a few hundred
stalled clients exhaust the memory limit of a process whose failure (``failurePolicy: Fail``)
blocks every workspace pod creation. Here each connection is given, as Go's ``http.Server``
does:

- a header deadline, armed at the TLS handshake's end and again at the first byte of each
  request;
- a body deadline, armed when the headers are in and disarmed once the body has arrived;
- an idle timeout between requests (aiohttp's keep-alive timer), longer than the API
  server's own, so the server never closes a connection the API server is about to reuse;
- a process-wide cap on open connections: one over the cap is closed as soon as it opens;
- a small TLS read buffer (asyncio allocates 256 KiB per TLS connection otherwise).

A connection past a deadline is aborted without a TLS close handshake: a client that stopped
sending usually stopped reading too.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import socket
import ssl
from typing import Any

from aiohttp import web

from wspin.http.limits import API_SERVER_IDLE_TIMEOUT, TLS_READ_BUFFER, ConnectionLimits

__all__ = [
    "API_SERVER_IDLE_TIMEOUT",
    "TLS_READ_BUFFER",
    "ConnectionLimits",
    "GuardedRequestHandler",
    "GuardedSite",
]


class _Census:
    """The open connections of one listening socket."""

    def __init__(self) -> None:
        self.open = 0
        self.refused = 0


class GuardedRequestHandler(web.RequestHandler):
    """aiohttp's connection protocol with the deadlines and the cap of ``ConnectionLimits``."""

    def __init__(
        self, manager: web.Server, limits: ConnectionLimits, census: _Census, **kwargs: Any
    ) -> None:
        super().__init__(manager, keepalive_timeout=limits.idle_timeout, **kwargs)
        self._guard_loop: asyncio.AbstractEventLoop = kwargs["loop"]
        self._limits = limits
        self._census = census
        self._deadline: asyncio.TimerHandle | None = None
        self._admitted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        census = self._census
        if census.open >= self._limits.max_connections:
            census.refused += 1
            assert isinstance(transport, asyncio.Transport)
            transport.abort()
            return
        census.open += 1
        self._admitted = True
        super().connection_made(transport)
        self._arm(self._limits.header_timeout)

    def connection_lost(self, exc: BaseException | None) -> None:
        if not self._admitted:
            return
        self._admitted = False
        self._census.open -= 1
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and data:
            self._arm(self._limits.header_timeout)  # the first byte of the next request
        super().data_received(data)

    def headers_read(self, payload: Any) -> None:
        """A request's headers are in: its body (if any) must follow within the body timeout;
        the deadline ends when the body has arrived whole."""
        if payload.is_eof():
            self._disarm()
            return
        self._arm(self._limits.body_timeout)
        payload.on_eof(self._disarm)

    def _arm(self, seconds: float) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self._guard_loop.call_later(seconds, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        transport = self.transport
        if transport is not None:
            transport.abort()


class GuardedSite(web.BaseSite):
    """A TCP listener whose connections get ``GuardedRequestHandler`` and ``limits``."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        limits: ConnectionLimits,
        ssl_context: ssl.SSLContext | None = None,
        backlog: int = 1024,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._guarded_runner = runner
        self._host = host
        self._port = port
        self._limits = limits
        self.census = _Census()
        self.bound_port = port

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._host}:{self.bound_port}"

    async def start(self) -> None:
        await super().start()
        asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER
        loop = asyncio.get_running_loop()
        server = self._guarded_runner.server
        assert server is not None
        limits, census = self._limits, self.census

        # aiohttp builds each request object once the request's headers are parsed: the one
        # moment every handler shares, so no handler needs to know about the deadlines.
        build_request = server.request_factory
        if not getattr(build_request, "guarded", False):

            def request_factory(
                message: Any, payload: Any, handler: Any, writer: Any, task: Any
            ) -> web.BaseRequest:
                handler.headers_read(payload)
                return build_request(message, payload, handler, writer, task)

            request_factory.guarded = True  # type: ignore[attr-defined]
            server.request_factory = request_factory

        def protocol() -> GuardedRequestHandler:
            return GuardedRequestHandler(
                server, limits, census, loop=loop, access_log=None, auto_decompress=False
            )

        tls: dict[str, Any] = {}
        if self._ssl_context is not None:
            tls = {
                "ssl": self._ssl_context,
                "ssl_handshake_timeout": limits.header_timeout,
                "ssl_shutdown_timeout": limits.header_timeout,
            }
        self._server = listener = await loop.create_server(
            protocol, self._host, self._port, backlog=self._backlog, reuse_address=True, **tls
        )
        for sock in listener.sockets:
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                self.bound_port = int(sock.getsockname()[1])
                break
