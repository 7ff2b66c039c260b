"""One clock and one time format for everything the controller writes.

Times on the wire are RFC 3339 in UTC with a ``Z`` and whole seconds, the format
``metav1.Time`` serialises to: a condition's ``lastTransitionTime`` and an Event's
timestamps then compare as plain strings.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
"""Returns the current time, timezone-aware UTC; tests pass a clock they move by hand."""

WIRE_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """``moment`` as RFC 3339 UTC with seconds precision (a naive time is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime(WIRE_FORMAT)


def parse_time(text: object) -> datetime | None:
    """An RFC 3339 time as written by ``format_time`` (fractions and offsets accepted);
    None for anything else, so a hand-edited status never crashes a reconcile."""
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.astimezone(UTC)
