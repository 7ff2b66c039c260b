"""The work queue: keys to reconcile, de-duplicated, with per-key backoff (client-go's
``workqueue``, in asyncio).

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
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from controller.types import ObjectKey
from wspin.core import backoff

BASE_DELAY = 0.005
"""Seconds before the first retry of a failed key (controller-runtime: 5 ms)."""

MAX_DELAY = 1000.0
"""Ceiling of the per-key backoff in seconds (controller-runtime: 1000 s)."""


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


class WorkQueue:
    """A de-duplicating FIFO of ``ObjectKey``s with delayed adds and per-key backoff."""

    def __init__(
        self,
        name: str,
        *,
        backoff: Backoff | None = None,
        on_depth: Callable[[int], None] | None = None,
    ) -> None:
        self.name = name
        self.backoff = backoff or Backoff()
        self._queue: deque[ObjectKey] = deque()
        self._dirty: set[ObjectKey] = set()
        self._processing: set[ObjectKey] = set()
        self._timers: dict[ObjectKey, tuple[float, asyncio.TimerHandle]] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._shutting_down = False
        self._on_depth = on_depth

    def __len__(self) -> int:
        """Keys waiting to be handed out (not counting delayed or in-flight ones)."""
        return len(self._queue)

    @property
    def in_flight(self) -> int:
        return len(self._processing)

    def holds(self, key: ObjectKey) -> bool:
        """``key`` is waiting, being processed, or due after a delay: without a new event it
        is handed out again only if this is true."""
        return key in self._dirty or key in self._processing or key in self._timers

    def delay_of(self, key: ObjectKey) -> float | None:
        """Seconds until ``key``'s delayed add fires; None when none is pending."""
        pending = self._timers.get(key)
        if pending is None:
            return None
        return max(0.0, pending[0] - asyncio.get_running_loop().time())

    def add(self, key: ObjectKey) -> None:
        """Queue ``key`` now, unless it is already waiting. Ignored after shutdown."""
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # handed out again by done()
        self._queue.append(key)
        self._changed()

    def add_after(self, key: ObjectKey, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds; of several pending delays the earliest wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        pending = self._timers.get(key)
        if pending is not None:
            if pending[0] <= due:
                return
            pending[1].cancel()
        self._timers[key] = (due, loop.call_at(due, self._fire, key))

    def add_rate_limited(self, key: ObjectKey) -> float:
        """Queue ``key`` after its backoff; returns the delay chosen."""
        delay = self.backoff.when(key)
        self.add_after(key, delay)
        return delay

    def forget(self, key: ObjectKey) -> None:
        """Reset ``key``'s failure count (after a successful reconcile)."""
        self.backoff.forget(key)

    async def get(self) -> ObjectKey:
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

    def done(self, key: ObjectKey) -> None:
        """Mark ``key`` processed; if it was added meanwhile, it goes back in the queue."""
        self._processing.discard(key)
        if key in self._dirty and not self._shutting_down:
            self._queue.append(key)
            self._changed()

    def shut_down(self) -> None:
        """Stop accepting keys and drop the waiting ones; in-flight keys may still finish.
        Every waiting ``get()`` raises ``ShutDown``."""
        self._shutting_down = True
        for _, timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._queue.clear()
        self._dirty.clear()
        self._changed()

    def _fire(self, key: ObjectKey) -> None:
        self._timers.pop(key, None)
        self.add(key)

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
