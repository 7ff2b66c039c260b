"""The clock's wire formats, and the fake clock tests move by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from tests.support.clock import FakeClock
from wspin.core.clock import format_micro_time, format_time, monotonic, parse_time, utc_now

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def test_times_are_rfc3339_utc_seconds_with_a_z_and_round_trip() -> None:
    assert format_time(NOW) == "2026-03-04T05:06:07Z"
    assert parse_time(format_time(NOW)) == NOW
    plus_two = NOW.astimezone(timezone(timedelta(hours=2)))
    assert format_time(plus_two) == "2026-03-04T05:06:07Z"
    assert format_time(NOW.replace(microsecond=999999)) == "2026-03-04T05:06:07Z"


def test_a_naive_time_is_written_as_utc() -> None:
    assert format_time(NOW.replace(tzinfo=None)) == "2026-03-04T05:06:07Z"


def test_micro_times_keep_microseconds_in_utc_as_a_lease_carries_them() -> None:
    moment = NOW.replace(microsecond=123456).astimezone(timezone(timedelta(hours=-5)))
    assert format_micro_time(moment) == "2026-03-04T05:06:07.123456Z"
    assert parse_time(format_micro_time(moment)) == NOW.replace(microsecond=123456)


@pytest.mark.parametrize("text", ["yesterday", "", None, 17, "2026-03-04T05:06:07"])
def test_unparseable_or_zoneless_times_are_none_not_an_error(text: object) -> None:
    assert parse_time(text) is None


def test_offsets_and_a_lowercase_z_are_read_as_utc() -> None:
    assert parse_time("2026-03-04T07:06:07+02:00") == NOW
    assert parse_time("2026-03-04T05:06:07z") == NOW


def test_the_real_clocks_are_utc_and_forward() -> None:
    assert utc_now().tzinfo is UTC
    first = monotonic()
    assert monotonic() >= first


def test_a_fake_clock_moves_only_when_told_and_both_times_together() -> None:
    clock = FakeClock(NOW, monotonic=5.0)
    assert clock() == NOW and clock.monotonic() == 5.0
    clock.advance(90)
    clock.advance(timedelta(seconds=10))
    assert clock() == NOW + timedelta(seconds=100)
    assert clock.monotonic() == 105.0


def test_setting_a_fake_wall_clock_leaves_monotonic_time_alone() -> None:
    clock = FakeClock(NOW)
    before = clock.monotonic()
    clock.set(NOW - timedelta(days=1))
    assert clock() == NOW - timedelta(days=1)
    assert clock.monotonic() == before


def test_a_fake_clock_refuses_to_go_back_or_to_start_without_a_zone() -> None:
    with pytest.raises(ValueError, match="forward"):
        FakeClock().advance(-1)
    with pytest.raises(ValueError, match="timezone"):
        FakeClock(datetime(2026, 1, 1))
