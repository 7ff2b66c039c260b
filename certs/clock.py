"""The wall clock, passed explicitly so the sources and the authority run on a fixed or
fake clock in tests; nothing in ``certs`` calls ``datetime.now`` elsewhere."""

from __future__ import annotations

import datetime
from collections.abc import Callable

Clock = Callable[[], datetime.datetime]


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
