"""A clock tests move by hand, for code that takes ``wspin.core.clock`` clocks.

One object serves both kinds of time: pass it where a ``Clock`` is expected (calling it gives
the wall time), and its ``monotonic`` where a ``Monotonic`` is expected. ``advance`` moves
both together; ``set`` jumps the wall clock only (to a certificate's renewal time, say), as a
node's clock can be set while monotonic time keeps running forward.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

START = datetime(2026, 1, 1, tzinfo=UTC)
"""Where a fake clock starts unless told otherwise."""


class FakeClock:
    """Wall and monotonic time that move only when told to."""

    def __init__(self, start: datetime = START, monotonic: float = 1000.0) -> None:
        if start.tzinfo is None:
            raise ValueError("a fake clock starts at a timezone-aware time")
        self.wall = start
        self.seconds = monotonic

    def __call__(self) -> datetime:
        return self.wall

    def monotonic(self) -> float:
        """The monotonic time in seconds (a ``Monotonic``)."""
        return self.seconds

    def advance(self, by: float | timedelta) -> None:
        """Move both clocks forward by ``by`` (seconds, or a timedelta)."""
        step = by if isinstance(by, timedelta) else timedelta(seconds=by)
        if step < timedelta(0):
            raise ValueError("time only moves forward")
        self.wall += step
        self.seconds += step.total_seconds()

    def set(self, moment: datetime) -> None:
        """Set the wall clock to ``moment`` (forward or back); monotonic time stays."""
        self.wall = moment


class RecordingSleep:
    """A ``sleep`` for code that takes one: records each delay asked for and returns at once.

    ``observe``, when set, is called at each sleep and its answers kept in ``seen`` (what a
    readiness check said while the code waited, say)."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.observe: Callable[[], object] | None = None
        self.seen: list[object] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        if self.observe is not None:
            self.seen.append(self.observe())
