"""Exponential backoff, written once: ``base * factor^(n-1)`` seconds after the n-th
consecutive failure, never more than ``cap``, optionally shortened at random by up to
``jitter`` of itself.

Every retry schedule of both processes is one of these with its own numbers: the work
queue's per-key retries (5 ms doubling to 1000 s), the recovery classes' pod retries, a
relay slot's launches (30 s doubling to 10 min), an informer's reconnects, the webhook's
image-volume probe and the certificate leader's re-reads after conflicts. Pure: the
failure count lives with the caller (a dict, a status field, a local), so the same
schedule serves in-memory and persisted counts alike.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """One retry schedule: ``delay(n)`` is the wait after the n-th consecutive failure."""

    base: float
    """Seconds after the first failure."""
    cap: float
    """Seconds no wait exceeds, however many failures."""
    factor: float = 2.0
    """Growth from one failure to the next."""
    jitter: float = 0.0
    """Fraction of a wait ``jittered`` may take off at random (0.5: between half and all of
    it), so many clients failing together do not retry together."""

    def __post_init__(self) -> None:
        if not (self.base >= 0 and self.cap >= 0 and self.factor >= 1 and 0 <= self.jitter <= 1):
            raise ValueError(f"invalid backoff {self!r}")

    def delay(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th consecutive failure (0 for none)."""
        if failures <= 0:
            return 0.0
        try:
            grown = self.base * self.factor ** (failures - 1)
        except OverflowError:  # a count far past the cap (a hand-edited status, say)
            return float(self.cap)
        return float(min(self.cap, grown))

    def jittered(self, failures: int, draw: Callable[[], float] = random.random) -> float:
        """``delay(failures)`` less a random part of ``jitter`` of it (``draw`` in [0, 1))."""
        return self.delay(failures) * (1 - self.jitter + self.jitter * draw())

    def delays(self) -> Iterator[float]:
        """The waits after the first, second, … failure, without end."""
        failures = 0
        while True:
            failures += 1
            yield self.delay(failures)
