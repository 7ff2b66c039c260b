"""What a port's connections share, and the rules for who gives way at each shared bound.

``Pool`` holds the connections of one listening port (``wspin.http.server``) and everything
they share: the routes, the limits, the read buffer, the body budget, the answers waiting to
be sent and the refusal log. A connection (``wspin.http.connection``) reports its progress
here; at a bound the pool picks the connection to shed by its ``phase``, which the connection
keeps and the pool reads, so both sides import this module and neither imports the other.

- connections, counted from accept: at the cap the one with least progress towards a complete
  request is closed to admit the new one: the one waiting longest on its client (idle between
  requests, or still in its handshake or headers), as nginx reuses idle keep-alive
  connections, else the oldest body behind the minimum rate. One with a whole request to
  answer never is; only when every connection is busy is the new one refused;
- request bodies held at once: a body that would go over the budget first sheds the stalled
  ones, furthest behind first, and is refused (503) only when none is stalled; the last part
  of the budget is kept for small bodies (reviews);
- answers waiting to be sent: past the total, the largest held by clients that stopped
  reading are aborted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Protocol

from wspin.http.limits import READ_BYTES, ConnectionLimits
from wspin.http.messages import Routes
from wspin.http.refusals import RefusalLog

HANDSHAKE, IDLE, HEAD, BODY, LINGER, CLOSING = range(6)
"""A connection's phase: which deadline applies. The first four wait on the client's next
bytes; at its cap the pool may close one of the first three, or one in BODY behind the
minimum rate, to admit a new connection (never one with a request to answer)."""
PHASE_NAMES = ("handshake", "idle", "header", "body", "linger", "closing")


class Member(Protocol):
    """A connection as the pool sees it: its progress, what it holds, and how to end it."""

    phase: int
    deadline: float
    send_deadline: float
    """Set while the client is not reading its answers."""
    queued: int
    """Answer bytes in the transport's send queue, as last seen."""
    body_bytes: int
    paid_until: float
    log_lines: float
    transport: asyncio.Transport | None

    @property
    def phase_name(self) -> str: ...
    @property
    def answering(self) -> bool: ...
    def behind(self, now: float) -> bool: ...
    def stalled(self, now: float) -> bool: ...
    def abort(self) -> None: ...
    def close(self) -> None: ...
    def expire(self, now: float) -> None: ...


class Pool:
    """The connections of one port, ``routes`` served within ``limits``; see the module
    docstring for who gives way at each bound."""

    def __init__(
        self, routes: Routes, limits: ConnectionLimits, log: logging.Logger | None = None
    ) -> None:
        self.routes = routes
        self.limits = limits
        self.log = log or logging.getLogger("wspin.http")
        self.refusals = RefusalLog(self.log, time.monotonic)
        self.connections: set[Member] = set()
        self.waiting: OrderedDict[Member, None] = OrderedDict()
        """Connections waiting on their client, longest first, none with a request to answer:
        the first to close at the cap."""
        self.bodies: dict[Member, None] = {}
        """Connections receiving a request body, oldest first: the next to close at the cap,
        when behind the minimum rate."""
        self.buffered = 0
        """Request body bytes held across connections."""
        self.queued_output = 0
        """Answer bytes waiting in the connections' send queues."""
        self.draining = False
        self.read_buffer = memoryview(bytearray(READ_BYTES))
        self.closed_since_trim = 0
        """Connections closed since memory was last given back."""
        self.released_since_trim = 0
        """Request body bytes let go since memory was last given back."""
        self._gone = asyncio.Event()
        """Set when the pool is draining and its last connection has closed."""

    # -- connections ---------------------------------------------------------------------------

    def admit(self, connection: Member) -> bool:
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

    def _least_progress(self) -> Member | None:
        """The connection to close at the cap: the one waiting longest on its client, else the
        oldest body behind the minimum rate; None when every connection is busy (answering, or
        receiving a body that moves)."""
        for connection in self.waiting:
            return connection
        now = asyncio.get_running_loop().time()
        for connection in self.bodies:
            # One with requests to answer has its reading paused until its client reads them:
            # its body waits on the server, and its send timeout bounds it.
            if connection.behind(now) and not connection.answering:
                return connection
        return None

    def forget(self, connection: Member) -> None:
        """A connection has closed."""
        self._drop(connection)
        self.closed_since_trim += 1
        if self.draining and not self.connections:
            self._gone.set()

    def _drop(self, connection: Member) -> None:
        if connection in self.connections:
            self.connections.discard(connection)
            self.queued_output -= connection.queued
            connection.queued = 0
        self.waiting.pop(connection, None)
        self.bodies.pop(connection, None)

    def wait(self, connection: Member) -> None:
        """``connection`` now waits on its client (the newest to do so)."""
        if connection in self.connections:
            self.waiting[connection] = None

    def stop_waiting(self, connection: Member) -> None:
        self.waiting.pop(connection, None)

    def receiving(self, connection: Member) -> None:
        """``connection`` has a request's headers and waits for its body (the newest to)."""
        self.waiting.pop(connection, None)
        self.bodies[connection] = None

    def first_to_evict(self, connection: Member) -> None:
        """``connection`` is ending: the first to close at the cap."""
        if connection in self.connections:
            self.waiting[connection] = None
            self.waiting.move_to_end(connection, last=False)

    # -- budgets -------------------------------------------------------------------------------

    def release(self, connection: Member, size: int) -> None:
        """``connection`` let go of ``size`` bytes of request body."""
        self.bodies.pop(connection, None)
        if size:
            self.buffered -= size
            self.released_since_trim += size

    def make_room(self, size: int, room: int, asking: Member) -> bool:
        """Shed stalled bodies, furthest behind first, until ``size`` more bytes fit within
        ``room`` of the body budget."""
        now = asyncio.get_running_loop().time()
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

    def account(self, connection: Member) -> None:
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
