"""Scheduler time that moves only when a test says so (``controller.workspace.agent.scheduler.
Waker`` over a ``FakeClock``): a deadline is reached by ``advance``, never by sleeping."""

from __future__ import annotations

import asyncio

from tests.support.clock import FakeClock


class FakeWaker:
    """``now`` is the fake clock's monotonic time; ``wait`` returns once the clock reached
    ``until`` (moved by ``advance``) or ``wake`` is set."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self._tick = asyncio.Event()

    def now(self) -> float:
        return self.clock.monotonic()

    async def wait(self, until: float | None, wake: asyncio.Event) -> None:
        while not wake.is_set() and (until is None or self.now() < until):
            waits = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(self._tick.wait())]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()

    def advance(self, seconds: float) -> None:
        """Move both clocks and wake every waiter to look again."""
        self.clock.advance(seconds)
        tick, self._tick = self._tick, asyncio.Event()
        tick.set()
