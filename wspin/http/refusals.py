"""Refusals logged at most once per kind per interval.

A flood is thousands of refusals a second; a log line each would cost more than the refusals
and bury everything else. The first of a kind is logged at once, the rest are counted, and the
count goes out with the next line of that kind once the interval has passed (or from the
server's deadline sweep, so a flood that stops is still reported).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from wspin.core.logs import fields

LOG_INTERVAL = 10.0
"""Seconds between two lines of the same kind."""


class RefusalLog:
    """Counts every refusal by kind; logs a sample of them."""

    def __init__(
        self, log: logging.Logger, clock: Callable[[], float], interval: float = LOG_INTERVAL
    ) -> None:
        self._log = log
        self._clock = clock
        self._interval = interval
        self.counts: dict[str, int] = {}
        """Refusals of each kind since start."""
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def note(self, kind: str, message: str, **values: Any) -> None:
        """One refusal of ``kind`` (a short fixed word: "connection-cap", "413", ...)."""
        self.counts[kind] = self.counts.get(kind, 0) + 1
        now = self._clock()
        last = self._last.get(kind)
        if last is not None and now - last < self._interval:
            self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
            return
        self._last[kind] = now
        more = self._suppressed.pop(kind, 0)
        if more:
            values["sameSinceLastLine"] = more
        self._log.warning(message, extra=fields(kind=kind, **values))

    def flush(self) -> None:
        """Log the count of each kind whose interval has passed with refusals unlogged."""
        now = self._clock()
        for kind, more in list(self._suppressed.items()):
            if now - self._last[kind] >= self._interval:
                del self._suppressed[kind]
                self._last[kind] = now
                self._log.warning("more refusals", extra=fields(kind=kind, sameSinceLastLine=more))
