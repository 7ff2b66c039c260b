"""Timers that move only when a test says so (``controller.runtime.queue.Timers`` over a
``FakeClock``), for the agent scheduler's work queue: a deadline is reached by ``advance``,
never by sleeping."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from tests.support.clock import FakeClock


class FakeTimer:
    def __init__(self, callback: Callable[..., object], args: tuple[Any, ...]) -> None:
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeWaker:
    """``now``/``time`` is the fake clock's monotonic time; a ``call_at`` callback runs when
    ``advance`` reaches its moment, in the order of the moments."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self._due: list[tuple[float, int, FakeTimer]] = []
        self._seq = 0

    def now(self) -> float:
        return self.clock.monotonic()

    def time(self) -> float:
        return self.clock.monotonic()

    def call_at(self, when: float, callback: Callable[..., object], *args: Any) -> FakeTimer:
        timer = FakeTimer(callback, args)
        self._seq += 1
        heapq.heappush(self._due, (when, self._seq, timer))
        return timer

    def advance(self, seconds: float) -> None:
        """Move both clocks, then run every callback due by the new time."""
        self.clock.advance(seconds)
        while self._due and self._due[0][0] <= self.now():
            _, _, timer = heapq.heappop(self._due)
            if not timer.cancelled:
                timer.callback(*timer.args)
