"""The running event loop's clock, stopped and moved by hand: fake time for code whose only
clock is the loop's (the HTTP server's deadlines, its sweep and its body rates read
``loop.time()``).

While the clock is stopped, real time passing moves nothing: a timer fires only when
``advance`` has moved the clock past it (the server's deadline sweep, an ``asyncio.sleep``, a
``wait_for``), and sockets are served as ever (the loop still waits for I/O). A test walks the
clock to a second before a bound (nothing happened yet) and past it (it happened) and reads
the result at once: no wall-clock window is asserted, and a loaded machine changes nothing.
``resume`` lets the clock run on from where it stands, for a teardown that waits on timers.

The asyncio loop calls its own ``time`` for every timer, so replacing it on the loop object
moves asyncio and the code alike. The loop is the test's own (function scope) and is closed
after it; the clock never runs backwards.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

TURNS = 10
"""Turns of the loop ``advance`` runs: a timer's callback, the task it wakes, what that task
closes (a transport's ``connection_lost``) and the client's read of it each take one."""


class LoopClock:
    """The loop's time: stopped at ``stopped`` (moved by ``advance``), or running."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._real: Callable[[], float] = loop.time
        self.stopped: float | None = self._real()
        self._offset = 0.0

    def __call__(self) -> float:
        return self.stopped if self.stopped is not None else self._real() + self._offset

    async def advance(self, seconds: float) -> None:
        """Move the stopped clock forward by ``seconds``, then run the loop's turns in which
        whatever fell due happens."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        assert self.stopped is not None, "the clock runs: stop it to move it"
        self.stopped += seconds
        await turns()

    def resume(self) -> None:
        """Let the clock run on from where it stands."""
        if self.stopped is not None:
            self._offset = self.stopped - self._real()
            self.stopped = None


async def turns(count: int = TURNS) -> None:
    """Let the loop run ``count`` turns (no timer needed: the clock may be stopped)."""
    for _ in range(count):
        await asyncio.sleep(0)


async def until(condition: Callable[[], bool], guard: float = 30) -> None:
    """Wait, turn by turn, for ``condition`` (something the loop's I/O brings about; a stopped
    clock fires no timer). ``guard`` real seconds only stop a test that would hang."""
    deadline = time.monotonic() + guard
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        await asyncio.sleep(0)


def install() -> LoopClock:
    """Stop the running loop's clock (a second call returns the same clock)."""
    loop = asyncio.get_running_loop()
    found = loop.__dict__.get("time")
    if isinstance(found, LoopClock):
        return found
    clock = LoopClock(loop)
    loop.time = clock  # type: ignore[method-assign]
    return clock
