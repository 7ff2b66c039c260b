"""The toolkit's pure parts: the wire time format, conditions and status merge patches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from controller.toolkit.clock import format_time, parse_time
from controller.toolkit.conditions import (
    condition,
    find_condition,
    is_true,
    remove_conditions,
    set_condition,
    set_conditions,
)
from controller.toolkit.status import status_patch

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def test_times_are_rfc3339_utc_seconds_with_a_z_and_round_trip() -> None:
    assert format_time(NOW) == "2026-03-04T05:06:07Z"
    assert parse_time(format_time(NOW)) == NOW
    plus_two = NOW.astimezone(timezone(timedelta(hours=2)))
    assert format_time(plus_two) == "2026-03-04T05:06:07Z"
    assert format_time(NOW.replace(microsecond=999999)) == "2026-03-04T05:06:07Z"


def test_unparseable_or_zoneless_times_are_none_not_an_error() -> None:
    for text in ("yesterday", "", None, 17, "2026-03-04T05:06:07"):
        assert parse_time(text) is None
    assert parse_time("2026-03-04T07:06:07+02:00") == NOW


def test_a_bool_status_is_spelled_and_generation_none_is_left_out() -> None:
    assert condition("Ready", True, "Ok", generation=None) == {
        "type": "Ready",
        "status": "True",
        "reason": "Ok",
        "message": "",
    }
    assert condition("Ready", False, "No", "why", 3)["observedGeneration"] == 3


def test_restating_a_condition_keeps_its_transition_time_and_a_flip_moves_it() -> None:
    first = set_condition([], condition("Ready", "False", "Starting"), "T1")
    again = set_condition(first, condition("Ready", "False", "StillStarting", "m"), "T2")
    assert again[0]["lastTransitionTime"] == "T1" and again[0]["reason"] == "StillStarting"
    flipped = set_condition(again, condition("Ready", "True", "Up"), "T3")
    assert flipped[0]["lastTransitionTime"] == "T3"
    assert first[0]["reason"] == "Starting"  # pure: the input list is untouched


def test_conditions_keep_their_order_and_can_be_removed() -> None:
    start = set_conditions(
        [], [condition("A", True, "a"), condition("B", True, "b"), condition("C", True, "c")], "T"
    )
    updated = set_condition(start, condition("B", False, "b2"), "T2")
    assert [c["type"] for c in updated] == ["A", "B", "C"]
    assert not is_true(updated, "B") and is_true(updated, "A")
    assert [c["type"] for c in remove_conditions(updated, ["A", "C"])] == ["B"]
    assert find_condition(updated, "Z") is None


def test_status_patch_sends_only_changes_and_nulls_dropped_keys() -> None:
    assert status_patch({"phase": "Active"}, {"phase": "Active"}) is None
    assert status_patch(
        {"phase": "Failed", "reason": "x", "keep": 1}, {"phase": "A", "keep": 1}
    ) == {
        "phase": "A",
        "reason": None,
    }
