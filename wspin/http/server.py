"""The HTTP/1.1 server every port of both processes runs: the admission port over TLS, and
the probe and metrics ports in plain HTTP.

A listening socket, its connections (``wspin.http.connection``) and what they share, each with
the bound of ``ConnectionLimits`` and, at the bound, a rule for who gives way:

- connections, counted from accept: at the cap the one with least progress towards a complete
  request is closed to admit the new one: the one waiting longest on its client (idle between
  requests, or still in its handshake or headers), as nginx reuses idle keep-alive
  connections, else the oldest body behind the minimum rate. One with a whole request to
  answer never is; only when every connection is busy is the new one refused;
- request bodies held at once: a body that would go over the budget first sheds the stalled
  ones, furthest behind first, and is refused (503) only when none is stalled; the last part
  of the budget is kept for small bodies (reviews);
- log lines per connection: past its budget a connection's requests are answered unlogged;
- answers waiting to be sent: past the total, the largest held by clients that stopped
  reading are aborted;
- deadlines: a sweep, a few times per shortest deadline, ends each connection past its own.

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
import time
from collections import OrderedDict

from wspin.http.connection import Connection
from wspin.http.limits import READ_BYTES, ConnectionLimits
from wspin.http.memory import release_freed_memory
from wspin.http.messages import Routes
from wspin.http.parsing import HANDSHAKE, IDLE
from wspin.http.refusals import RefusalLog

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


class HttpServer:
    """One listening port: ``routes`` served within ``limits``."""

    def __init__(
        self,
        routes: Routes,
        limits: ConnectionLimits,
        *,
        ssl_context: ssl.SSLContext | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        self.routes = routes
        self.limits = limits
        self.log = log or logging.getLogger("wspin.http")
        self.refusals = RefusalLog(self.log, time.monotonic)
        self.port = 0
        """The bound port once started (differs from the one asked when 0 was asked)."""
        self.connections: set[Connection] = set()
        self.waiting: OrderedDict[Connection, None] = OrderedDict()
        """Connections waiting on their client, longest first, none with a request to answer:
        the first to close at the cap."""
        self.bodies: dict[Connection, None] = {}
        """Connections receiving a request body, oldest first: the next to close at the cap,
        when behind the minimum rate."""
        self.buffered = 0
        """Request body bytes held across connections."""
        self.queued_output = 0
        """Answer bytes waiting in the connections' send queues."""
        self.draining = False
        self.read_buffer = memoryview(bytearray(READ_BYTES))
        self._ssl = ssl_context
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._gone = asyncio.Event()
        self._closed_since_trim = 0
        self.released_since_trim = 0
        """Request body bytes let go since memory was last given back."""
        self._trimmed_at = 0.0

    async def start(self, host: str, port: int) -> int:
        """Listen on host:port (0 = any free port); returns the bound port."""
        loop = self._loop = asyncio.get_running_loop()
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

    # -- connections ---------------------------------------------------------------------------

    def admit(self, connection: Connection) -> bool:
        """A connection was accepted: count it, closing the longest-waiting one at the cap."""
        if self.draining:
            return False
        if len(self.connections) >= self.limits.max_connections:
            victim = self._least_progress()
            if victim is None:
                self.refusals.note(
                    "connection-cap",
                    "connection refused: every connection is busy",
                    maxConnections=self.limits.max_connections,
                )
                return False
            self.refusals.note(
                "evicted",
                "closed the connection with least progress to admit a new one",
                maxConnections=self.limits.max_connections,
                phase=victim.phase_name,
            )
            self._drop(victim)
            victim.abort()
        self.connections.add(connection)
        self.waiting[connection] = None
        return True

    def _least_progress(self) -> Connection | None:
        """The connection to close at the cap: the one waiting longest on its client, else the
        oldest body behind the minimum rate; None when every connection is busy (answering, or
        receiving a body that moves)."""
        for connection in self.waiting:
            return connection
        assert self._loop is not None
        now = self._loop.time()
        for connection in self.bodies:
            # One with requests to answer has its reading paused until its client reads them:
            # its body waits on the server, and its send timeout bounds it.
            if connection.behind(now) and not connection.answering:
                return connection
        return None

    def forget(self, connection: Connection) -> None:
        """A connection has closed."""
        self._drop(connection)
        self._closed_since_trim += 1
        if self.draining and not self.connections:
            self._gone.set()

    def _drop(self, connection: Connection) -> None:
        if connection in self.connections:
            self.connections.discard(connection)
            self.queued_output -= connection.queued
            connection.queued = 0
        self.waiting.pop(connection, None)
        self.bodies.pop(connection, None)

    def wait(self, connection: Connection) -> None:
        """``connection`` now waits on its client (the newest to do so)."""
        if connection in self.connections:
            self.waiting[connection] = None

    def stop_waiting(self, connection: Connection) -> None:
        self.waiting.pop(connection, None)

    def receiving(self, connection: Connection) -> None:
        """``connection`` has a request's headers and waits for its body (the newest to)."""
        self.waiting.pop(connection, None)
        self.bodies[connection] = None

    def first_to_evict(self, connection: Connection) -> None:
        """``connection`` is ending: the first to close at the cap."""
        if connection in self.connections:
            self.waiting[connection] = None
            self.waiting.move_to_end(connection, last=False)

    # -- budgets -------------------------------------------------------------------------------

    def make_room(self, size: int, room: int, asking: Connection) -> bool:
        """Shed stalled bodies, furthest behind first, until ``size`` more bytes fit within
        ``room`` of the body budget."""
        assert self._loop is not None
        now = self._loop.time()
        stalled = [c for c in self.bodies if c is not asking and c.body_bytes and c.stalled(now)]
        stalled.sort(key=lambda c: c.paid_until)
        for victim in stalled:
            if self.buffered + size <= room:
                break
            self.refusals.note(
                "stalled-body",
                "dropped a stalled request body to make room for one that is moving",
                heldBytes=victim.body_bytes,
                budgetBytes=self.limits.max_buffered_body_bytes,
            )
            victim.abort()
        return self.buffered + size <= room

    def account(self, connection: Connection) -> None:
        """Note what ``connection`` has waiting to be sent; shed the largest stalled senders
        when the total is over its bound."""
        transport = connection.transport
        size = transport.get_write_buffer_size() if transport is not None else 0
        if size == connection.queued:
            return
        self.queued_output += size - connection.queued
        connection.queued = size
        limit = self.limits.max_queued_output_bytes
        if self.queued_output <= limit:
            return
        stalled = [c for c in self.connections if c.queued and c.send_deadline != float("inf")]
        stalled.sort(key=lambda c: c.queued, reverse=True)
        for victim in stalled:
            if self.queued_output <= limit:
                break
            self.refusals.note(
                "output-budget",
                "aborted a connection whose client stopped reading its answers",
                queuedBytes=victim.queued,
                budgetBytes=limit,
            )
            self._drop(victim)
            victim.abort()

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
                self._closed_since_trim >= TRIM_AFTER_CLOSES
                or self.released_since_trim >= TRIM_AFTER_BODY_BYTES
            ) and now - self._trimmed_at > TRIM_INTERVAL:
                self._closed_since_trim = 0
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
