"""The clock: wall time, monotonic time, and the one wire format of times.

Code that decides by time takes its clock as an argument (``clock: Clock = utc_now``,
``monotonic: Monotonic = monotonic``) instead of calling ``datetime.now`` or
``time.monotonic`` itself, so a test runs it on a clock it moves by hand
(``tests/support/clock.py``) and never sleeps to see a deadline pass.

- Wall time (``Clock``) is for what is written down or compared with other machines' times:
  certificate validity, condition and Event timestamps, relay VM ages.
- Monotonic time (``Monotonic``) is for intervals measured inside this process: cache ages,
  reservations, backoff. It never jumps when the node's clock is set.

Times on the wire are RFC 3339 in UTC with a ``Z``: whole seconds for ``metav1.Time``
(condition ``lastTransitionTime``, Event timestamps, annotations), so two of them compare as
plain strings, and microseconds for ``metav1.MicroTime`` (a Lease's ``renewTime``).

Pure: reading the time is the only effect here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

Clock = Callable[[], datetime]
"""Returns the current wall time, timezone-aware UTC."""

Monotonic = Callable[[], float]
"""Returns seconds on a clock that only moves forward (its origin means nothing)."""

WIRE_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"
"""``metav1.Time``: RFC 3339, UTC, whole seconds."""

MICRO_WIRE_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"
"""``metav1.MicroTime``: RFC 3339, UTC, microseconds."""


def utc_now() -> datetime:
    """The wall clock: now, timezone-aware UTC."""
    return datetime.now(UTC)


def monotonic() -> float:
    """The monotonic clock, in seconds."""
    return time.monotonic()


def _utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive time is taken as UTC already."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def format_time(moment: datetime) -> str:
    """``moment`` as ``metav1.Time`` (RFC 3339 UTC, whole seconds)."""
    return _utc(moment).strftime(WIRE_FORMAT)


def format_micro_time(moment: datetime) -> str:
    """``moment`` as ``metav1.MicroTime`` (RFC 3339 UTC, microseconds), as a Lease carries it."""
    return _utc(moment).strftime(MICRO_WIRE_FORMAT)


def parse_time(text: object) -> datetime | None:
    """An RFC 3339 time (``Z`` or an offset, fractions accepted) as UTC; None for anything
    else, so a hand-edited status or annotation never crashes the code reading it."""
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.astimezone(UTC)
