"""The work queue: keys to reconcile, de-duplicated, with per-key backoff (client-go's
``workqueue``, in asyncio).

Keys are ``ObjectKey``s for the reconcilers; other work keyed by any hashable value (an agent
read: a Workspace and what to read of it) uses the same queue, handed out by ``pool.serve``.

Delayed adds wait in one heap with one event-loop timer for the earliest (client-go's
delaying queue), not one timer each: tens of thousands of pending adds (a requeue per
Workspace, two reads per agent) would otherwise sit in the event loop's own timer heap, whose
entries compare in Python, and slow every timer of the process. A superseded or cancelled
entry stays in the heap until it surfaces or the heap is compacted (at most twice the pending
adds, plus a little). Time is the running event loop's, or ``Timers`` a test moves by hand.

Guarantees the reconcilers rely on:
- a key is never handed to two workers at once; a key added while it is being processed
  is handed out again after ``done`` (so the change that arrived meanwhile is not lost);
- a key queued many times before a worker takes it is reconciled once;
- ``add_rate_limited`` waits ``base_delay * 2^failures`` (5 ms doubling to 1000 s, as
  controller-runtime's default per-item limiter), and ``forget`` resets the count after
  a success.
"""

from __future__ import annotations

import asyncio
import heapq
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol

from typing_extensions import TypeVar

from controller.types import ObjectKey
from wspin.core import backoff

BASE_DELAY = 0.005
"""Seconds before the first retry of a failed key (controller-runtime: 5 ms)."""

MAX_DELAY = 1000.0
"""Ceiling of the per-key backoff in seconds (controller-runtime: 1000 s)."""


K = TypeVar("K", bound=Hashable, default=ObjectKey)
"""A queue's key type: ``ObjectKey`` for reconcilers."""


class Timer(Protocol):
    def cancel(self) -> None: ...


class Timers(Protocol):
    """Where delayed adds wait (the running event loop's ``time`` and ``call_at`` unless
    given): a monotonic time in seconds, and a callback at a moment on it."""

    def time(self) -> float: ...

    def call_at(self, when: float, callback: Callable[..., object], *args: Any) -> Timer: ...


class ShutDown(Exception):
    """``get()`` on a queue that is shut down and drained: the worker should exit."""


@dataclass
class Backoff:
    """Per-key exponential backoff: ``base * 2^n`` for the n-th consecutive failure, capped."""

    base: float = BASE_DELAY
    cap: float = MAX_DELAY
    failures: dict[ObjectKey, int] = field(default_factory=dict)
    schedule: backoff.Backoff = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.schedule = backoff.Backoff(self.base, self.cap)

    def when(self, key: ObjectKey) -> float:
        """Record one more failure of ``key`` and return how long to wait before retrying."""
        n = self.failures.get(key, 0) + 1
        self.failures[key] = n
        return self.schedule.delay(n)

    def forget(self, key: ObjectKey) -> None:
        self.failures.pop(key, None)

    def retries(self, key: ObjectKey) -> int:
        return self.failures.get(key, 0)


class WorkQueue(Generic[K]):
    """A de-duplicating FIFO of keys with delayed adds and per-key backoff."""

    def __init__(
        self,
        name: str,
        *,
        backoff: Backoff | None = None,
        on_depth: Callable[[int], None] | None = None,
        timers: Timers | None = None,
    ) -> None:
        self.name = name
        self.backoff = backoff or Backoff()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._clock = timers
        """None: the running event loop."""
        self._timers: dict[K, float] = {}
        """The moment of each key's pending delayed add."""
        self._delays: list[tuple[float, int, K]] = []
        """(moment, sequence, key) of delayed adds; entries not in ``_timers`` are stale."""
        self._seq = 0
        self._alarm: tuple[float, Timer] | None = None
        """The one event-loop timer, set for the earliest moment in ``_delays``."""
        self._waiters: list[asyncio.Future[None]] = []
        self._shutting_down = False
        self._on_depth = on_depth

    def __len__(self) -> int:
        """Keys waiting to be handed out (not counting delayed or in-flight ones)."""
        return len(self._queue)

    @property
    def in_flight(self) -> int:
        return len(self._processing)

    def holds(self, key: K) -> bool:
        """``key`` is waiting, being processed, or due after a delay: without a new event it
        is handed out again only if this is true."""
        return key in self._dirty or key in self._processing or key in self._timers

    def delay_of(self, key: K) -> float | None:
        """Seconds until ``key``'s delayed add fires; None when none is pending."""
        pending = self._timers.get(key)
        if pending is None:
            return None
        return max(0.0, pending - self._on().time())

    def add(self, key: K) -> None:
        """Queue ``key`` now, unless it is already waiting. Ignored after shutdown."""
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # handed out again by done()
        self._queue.append(key)
        self._changed()

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds; of several pending delays the earliest wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        clock = self._on()
        due = clock.time() + delay
        pending = self._timers.get(key)
        if pending is not None and pending <= due:
            return
        self._timers[key] = due
        self._seq += 1
        heapq.heappush(self._delays, (due, self._seq, key))
        if len(self._delays) > 2 * len(self._timers) + 64:
            self._compact()
        self._arm(clock)

    def cancel(self, key: K) -> None:
        """Drop ``key``'s pending delayed add, if any (a key already waiting stays)."""
        self._timers.pop(key, None)

    def add_rate_limited(self: WorkQueue[ObjectKey], key: ObjectKey) -> float:
        """Queue ``key`` after its backoff; returns the delay chosen."""
        delay = self.backoff.when(key)
        self.add_after(key, delay)
        return delay

    def forget(self: WorkQueue[ObjectKey], key: ObjectKey) -> None:
        """Reset ``key``'s failure count (after a successful reconcile)."""
        self.backoff.forget(key)

    async def get(self) -> K:
        """The next key; wait for one. Raises ``ShutDown`` once shut down and drained."""
        while not self._queue:
            if self._shutting_down:
                raise ShutDown(self.name)
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        self._report_depth()
        return key

    def done(self, key: K) -> None:
        """Mark ``key`` processed; if it was added meanwhile, it goes back in the queue."""
        self._processing.discard(key)
        if key in self._dirty and not self._shutting_down:
            self._queue.append(key)
            self._changed()

    def shut_down(self) -> None:
        """Stop accepting keys and drop the waiting ones; in-flight keys may still finish.
        Every waiting ``get()`` raises ``ShutDown``."""
        self._shutting_down = True
        if self._alarm is not None:
            self._alarm[1].cancel()
            self._alarm = None
        self._timers.clear()
        self._delays.clear()
        self._queue.clear()
        self._dirty.clear()
        self._changed()

    def _arm(self, clock: Timers | asyncio.AbstractEventLoop) -> None:
        """Set the one timer for the earliest pending moment (if it is not set for it)."""
        while self._delays and self._timers.get(self._delays[0][2]) != self._delays[0][0]:
            heapq.heappop(self._delays)  # superseded or cancelled
        earliest = self._delays[0][0] if self._delays else None
        if self._alarm is not None:
            if self._alarm[0] == earliest:
                return
            self._alarm[1].cancel()
            self._alarm = None
        if earliest is not None:
            self._alarm = (earliest, clock.call_at(earliest, self._fire, earliest))

    def _fire(self, moment: float) -> None:
        """The timer for ``moment`` went off: add every key due by now (a busy loop runs a
        timer late, and each key must not wait for a turn of its own), set the next."""
        self._alarm = None
        clock = self._on()
        moment = max(moment, clock.time())  # the loop may run a timer a hair early
        while self._delays and self._delays[0][0] <= moment:
            due, _, key = heapq.heappop(self._delays)
            if self._timers.get(key) == due:
                del self._timers[key]
                self.add(key)
        if not self._shutting_down:
            self._arm(clock)

    def _compact(self) -> None:
        self._delays = [entry for entry in self._delays if self._timers.get(entry[2]) == entry[0]]
        heapq.heapify(self._delays)

    def _on(self) -> Timers | asyncio.AbstractEventLoop:
        return self._clock if self._clock is not None else asyncio.get_running_loop()

    def _changed(self) -> None:
        """Wake every waiting worker; those that find the queue empty wait again."""
        self._report_depth()
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _report_depth(self) -> None:
        if self._on_depth is not None:
            self._on_depth(len(self._queue))
