"""The HTTP/1.1 server every port of both processes runs: the admission port over TLS, and
the probe and metrics ports in plain HTTP.

A listening socket and its connections (``wspin.http.connection``), with what they share and
the rule for who gives way at each shared bound in ``wspin.http.pool`` (connections, request
bodies, answers waiting to be sent). Here:

- deadlines: a sweep, a few times per shortest deadline, ends each connection past its own;
- log lines per connection: the sweep refills each connection's budget; past it a
  connection's requests are answered unlogged.

Refusals are counted by kind and logged at most once per kind per ten seconds. Once a hundred
connections have closed, or 16 MiB of request bodies been let go, the sweep gives the memory
they freed back to the system
(``wspin.http.memory``), so a process returns to its idle size after a flood.

Shutdown (``shutdown()``): stop accepting; close idle connections at once; answer requests
already arriving (each answer says ``Connection: close``); after ``drain_timeout`` abort every
connection left, so a client that stopped reading cannot hold the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl

from wspin.http.connection import Connection
from wspin.http.limits import ConnectionLimits
from wspin.http.memory import release_freed_memory
from wspin.http.messages import Routes
from wspin.http.pool import HANDSHAKE, IDLE, Pool

__all__ = ["HttpServer", "serve"]

ACCEPT_BACKLOG = 1024
"""Connections the kernel queues before accept."""
TRIM_AFTER_CLOSES = 100
"""Connections closed since memory was last given back that make it worth doing again."""
TRIM_AFTER_BODY_BYTES = 16 * 1024 * 1024
"""Request body bytes let go since memory was last given back that make it worth doing again:
a few dozen large bodies are held in pieces of a read each, which the C heap keeps."""
TRIM_INTERVAL = 5.0
"""Seconds between two returns of freed memory to the system, at most."""
_ABORTED_GONE = 1.0
"""Seconds for aborted connections to be reported lost (a loop turn or two)."""


class HttpServer(Pool):
    """One listening port: ``routes`` served within ``limits``."""

    def __init__(
        self,
        routes: Routes,
        limits: ConnectionLimits,
        *,
        ssl_context: ssl.SSLContext | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        super().__init__(routes, limits, log)
        self.port = 0
        """The bound port once started (differs from the one asked when 0 was asked)."""
        self._ssl = ssl_context
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._trimmed_at = 0.0

    async def start(self, host: str, port: int) -> int:
        """Listen on host:port (0 = any free port); returns the bound port."""
        loop = asyncio.get_running_loop()
        tls = self._ssl
        self._server = await loop.create_server(
            lambda: Connection(self, loop, tls),
            host,
            port,
            backlog=ACCEPT_BACKLOG,
            reuse_address=True,
        )
        for sock in self._server.sockets:
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                self.port = int(sock.getsockname()[1])
                break
        self._sweeper = asyncio.create_task(self._sweep(loop), name="connection-deadlines")
        return self.port

    async def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        """End each connection past its deadline, a few times per shortest deadline; recount
        the answers waiting to be sent; log the refusals held back."""
        limits = self.limits
        shortest = min(
            limits.handshake_timeout,
            limits.header_timeout,
            limits.body_timeout,
            limits.linger_timeout,
        )
        interval = min(1.0, shortest / 5)
        log_refill = limits.log_lines_per_second * interval
        log_burst = float(limits.log_burst_lines)
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            total = 0
            for connection in list(self.connections):
                if connection.deadline < now or connection.send_deadline < now:
                    connection.expire(now)
                if connection.log_lines < log_burst:
                    connection.log_lines = min(log_burst, connection.log_lines + log_refill)
                transport = connection.transport
                connection.queued = transport.get_write_buffer_size() if transport else 0
                total += connection.queued
            self.queued_output = total
            self.refusals.flush()
            if (
                self.closed_since_trim >= TRIM_AFTER_CLOSES
                or self.released_since_trim >= TRIM_AFTER_BODY_BYTES
            ) and now - self._trimmed_at > TRIM_INTERVAL:
                self.closed_since_trim = 0
                self.released_since_trim = 0
                self._trimmed_at = now
                release_freed_memory()

    # -- shutdown ------------------------------------------------------------------------------

    async def shutdown(self) -> None:
        """Stop accepting, close idle connections, answer requests already arriving for up
        to ``drain_timeout``, then abort every connection left."""
        if self._server is None:
            return
        self._server.close()
        self.draining = True
        for connection in list(self.connections):
            if connection.phase == HANDSHAKE:
                connection.abort()
            elif connection.phase == IDLE and not connection.answering:
                connection.close()
        await self._until_gone(self.limits.drain_timeout)
        for connection in list(self.connections):
            connection.abort()
        await self._until_gone(_ABORTED_GONE)
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        # From Python 3.12 this waits for every connection, which are all gone by now.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), _ABORTED_GONE)
        self._server = None
        self.refusals.flush()

    async def _until_gone(self, seconds: float) -> None:
        if self.connections:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._gone.wait(), seconds)


async def serve(
    routes: Routes,
    host: str,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None = None,
    limits: ConnectionLimits | None = None,
    log: logging.Logger | None = None,
) -> HttpServer:
    """Serve ``routes`` on host:port (0 = any free port) within ``limits`` (the defaults when
    None); ``server.port`` is the bound port, ``await server.shutdown()`` stops it."""
    server = HttpServer(routes, limits or ConnectionLimits(), ssl_context=ssl_context, log=log)
    await server.start(host, port)
    return server
