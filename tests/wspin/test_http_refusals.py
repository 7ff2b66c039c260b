"""Refusals are counted one by one and logged at most once per kind per interval."""

from __future__ import annotations

import logging

import pytest

from wspin.http.refusals import RefusalLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_of_one_kind_is_one_line_per_interval_with_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    refusals = RefusalLog(logging.getLogger("test.refusals"), clock, interval=10)
    with caplog.at_level(logging.WARNING, "test.refusals"):
        for _ in range(1000):
            refusals.note("413", "refused HTTP request", status=413)
        assert len(caplog.records) == 1
        clock.now += 10
        refusals.note("413", "refused HTTP request", status=413)
    assert refusals.counts == {"413": 1001}
    first, second = (record.__dict__["fields"] for record in caplog.records)
    assert first == {"kind": "413", "status": 413}
    assert second == {"kind": "413", "status": 413, "sameSinceLastLine": 999}


def test_kinds_are_limited_apart_and_a_flood_that_stops_is_still_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    refusals = RefusalLog(logging.getLogger("test.refusals"), clock, interval=10)
    with caplog.at_level(logging.WARNING, "test.refusals"):
        for kind in ("evicted", "evicted", "stalled-body", "evicted"):
            refusals.note(kind, "shed")
        assert len(caplog.records) == 2  # the first of each kind
        refusals.flush()
        assert len(caplog.records) == 2  # within the interval: held back
        clock.now += 10
        refusals.flush()
    last = caplog.records[-1].__dict__["fields"]
    assert last == {"kind": "evicted", "sameSinceLastLine": 2}
    assert len(caplog.records) == 3
