"""The pure decisions: state transitions, conditions, backoff, requeue intervals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controller.relay import decisions
from controller.relay.spec import STATES, Condition, new_instance

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

TRANSITIONS = [
    ("", True, "healthy"),
    ("", False, ""),
    ("provisioning", True, "healthy"),
    ("provisioning", False, "provisioning"),
    ("healthy", True, "healthy"),
    ("healthy", False, "unhealthy"),
    ("unhealthy", True, "healthy"),
    ("unhealthy", False, "unhealthy"),
    ("draining", True, "draining"),
    ("draining", False, "draining"),
    ("terminated", True, "terminated"),
    ("terminated", False, "terminated"),
    ("quota-exhausted", True, "quota-exhausted"),
    ("quota-exhausted", False, "quota-exhausted"),
    ("provisioning-failed", True, "provisioning-failed"),
    ("provisioning-failed", False, "provisioning-failed"),
]


@pytest.mark.parametrize(("state", "healthy", "expected"), TRANSITIONS)
def test_router_health_drives_the_instance_state(state: str, healthy: bool, expected: str) -> None:
    assert decisions.transition(state, healthy) == expected


def test_the_transition_table_covers_every_state() -> None:
    assert {row[0] for row in TRANSITIONS} == {"", *STATES}


def test_backoff_doubles_from_thirty_seconds_to_ten_minutes() -> None:
    assert [decisions.backoff_seconds(n) for n in range(7)] == [0, 30, 60, 120, 240, 480, 600]


def _fleet(*healthy: bool) -> list[dict[str, object]]:
    return [
        new_instance(instance_id=f"i-{n}", provider=f"p{n}", region="r", healthy=h,
                     state="healthy" if h else "unhealthy")
        for n, h in enumerate(healthy)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("healthy", "ready", "ready_reason", "degraded", "degraded_reason"),
    [
        ((), "False", "NoInstances", "True", "Empty"),
        ((True, True), "True", "AllRelaysHealthy", "False", "FleetHealthy"),
        ((False, False), "False", "NoHealthyRelays", "True", "AllRelaysUnhealthy"),
        ((True, False), "True", "PartialFleet", "True", "PartialOutage"),
    ],
)
def test_ready_means_one_healthy_relay_and_degraded_carries_the_rest(
    healthy: tuple[bool, ...], ready: str, ready_reason: str, degraded: str, degraded_reason: str
) -> None:
    conditions: list[Condition] = []
    decisions.fleet_conditions(conditions, _fleet(*healthy), fallback_active=False, now=NOW)
    by_type = {c["type"]: c for c in conditions}
    assert (by_type["Ready"]["status"], by_type["Ready"]["reason"]) == (ready, ready_reason)
    assert (by_type["Degraded"]["status"], by_type["Degraded"]["reason"]) == (
        degraded,
        degraded_reason,
    )
    assert by_type["FallbackActive"]["status"] == "False"


def test_fallback_mode_sets_fallback_active() -> None:
    conditions: list[Condition] = []
    decisions.fleet_conditions(conditions, _fleet(False), fallback_active=True, now=NOW)
    fallback = next(c for c in conditions if c["type"] == "FallbackActive")
    assert (fallback["status"], fallback["reason"]) == ("True", "AllRelaysDown")


def test_a_condition_keeps_its_transition_time_until_its_status_flips() -> None:
    conditions: list[Condition] = []
    decisions.set_condition(conditions, "Ready", True, "A", "one", NOW)
    later = NOW + timedelta(minutes=5)
    decisions.set_condition(conditions, "Ready", True, "B", "two", later)
    assert conditions[0]["lastTransitionTime"] == "2026-03-01T12:00:00Z"
    assert (conditions[0]["reason"], conditions[0]["message"]) == ("B", "two")
    decisions.set_condition(conditions, "Ready", False, "C", "", later)
    assert conditions[0]["lastTransitionTime"] == "2026-03-01T12:05:00Z"
    assert len(conditions) == 1


@pytest.mark.parametrize(
    ("busy", "healthy", "total", "seconds"),
    [(True, 1, 1, 10.0), (False, 0, 1, 15.0), (False, 2, 2, 30.0), (False, 0, 0, 30.0)],
)
def test_requeue_intervals(busy: bool, healthy: int, total: int, seconds: float) -> None:
    assert decisions.requeue_seconds(busy=busy, healthy=healthy, total=total) == seconds
