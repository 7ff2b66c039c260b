"""The fleet's status after a pass: transitions, backoff, conditions and requeue intervals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controller.relay.entries import backoff_seconds
from controller.relay.fleetstatus import fleet_status, requeue_seconds
from controller.relay.health import HealthReport
from controller.relay.observed import transition
from controller.relay.spec import STATES, Instance, new_instance
from controller.toolkit.conditions import find_condition
from controller.types import Obj

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
    assert transition(state, healthy) == expected


def test_the_transition_table_covers_every_state() -> None:
    assert {row[0] for row in TRANSITIONS} == {"", *STATES}


def test_backoff_doubles_from_thirty_seconds_to_ten_minutes() -> None:
    assert [backoff_seconds(n) for n in range(7)] == [0, 30, 60, 120, 240, 480, 600]


def _fleet(*healthy: bool) -> list[Instance]:
    return [
        new_instance(instance_id=f"i-{n}", provider=f"p{n}", region="r", healthy=h,
                     state="healthy" if h else "unhealthy")
        for n, h in enumerate(healthy)
    ]  # fmt: skip


def _conditions(status: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in status["conditions"]}


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
    status = fleet_status({}, _fleet(*healthy), None, now=NOW, generation=1)
    by_type = _conditions(status)
    assert (by_type["Ready"]["status"], by_type["Ready"]["reason"]) == (ready, ready_reason)
    assert (by_type["Degraded"]["status"], by_type["Degraded"]["reason"]) == (
        degraded,
        degraded_reason,
    )
    assert by_type["FallbackActive"]["status"] == "False"
    assert status["healthyReplicas"] == sum(healthy)


def test_fallback_mode_sets_fallback_active() -> None:
    status = fleet_status(
        {}, _fleet(False), HealthReport(fallback_active=True), now=NOW, generation=1
    )
    fallback = _conditions(status)["FallbackActive"]
    assert (fallback["status"], fallback["reason"]) == ("True", "AllRelaysDown")


def test_a_condition_keeps_its_transition_time_until_its_status_flips() -> None:
    first = fleet_status({}, _fleet(True), None, now=NOW, generation=1)
    later = NOW + timedelta(minutes=5)
    again = fleet_status(first, _fleet(True, False), None, now=later, generation=1)
    ready = _conditions(again)["Ready"]
    assert (
        ready["lastTransitionTime"] == "2026-03-01T12:00:00Z" and ready["reason"] == "PartialFleet"
    )
    down = fleet_status(again, _fleet(False), None, now=later, generation=1)
    assert _conditions(down)["Ready"]["lastTransitionTime"] == "2026-03-01T12:05:00Z"


def test_the_breaker_trips_at_three_configuration_errors_and_records_the_generation() -> None:
    failed = new_instance(instance_id="aws-provisioning", provider="aws", region="r",
                          state="provisioning-failed", provisioningAttempts=2,
                          lastProvisionError="bad AMI")  # fmt: skip
    retrying = _conditions(fleet_status({}, [failed], None, now=NOW, generation=4))
    assert retrying["ProvisioningFailed"]["reason"] == "Retrying"
    tripped_entry = failed | {"provisioningAttempts": 3}
    tripped = _conditions(fleet_status({}, [tripped_entry], None, now=NOW, generation=4))
    breaker = tripped["ProvisioningFailed"]
    assert (breaker["status"], breaker["reason"]) == ("True", "CircuitBreakerTripped")
    assert "aws failed 3 times: bad AMI" in breaker["message"]
    assert breaker["observedGeneration"] == 4


def test_a_rotation_sets_rotating_until_the_fleet_is_healthy_again() -> None:
    rotated = fleet_status({}, [], None, now=NOW, generation=1, rotated="rotated aws relay i-1")
    assert _conditions(rotated)["Rotating"]["status"] == "True"
    assert rotated["lastRotation"] == "2026-03-01T12:00:00Z"
    booting = fleet_status(rotated, _fleet(False), None, now=NOW, generation=1)
    assert _conditions(booting)["Rotating"]["status"] == "True"
    done = fleet_status(booting, _fleet(True), None, now=NOW, generation=1)
    rotating = find_condition(done["conditions"], "Rotating")
    assert rotating is not None and rotating["reason"] == "RotationComplete"


@pytest.mark.parametrize(
    ("states", "waits", "seconds"),
    [
        (["provisioning"], [], 10.0),
        (["unhealthy"], [], 15.0),
        (["healthy"], [], 30.0),
        ([], [], 30.0),
        (["healthy"], [4.5], 4.5),
        (["provisioning"], [600.0], 10.0),
    ],
)
def test_requeue_intervals(states: list[str], waits: list[float], seconds: float) -> None:
    instances = [
        new_instance(instance_id=f"i-{n}", provider=f"p{n}", region="r", state=state,
                     healthy=state == "healthy")
        for n, state in enumerate(states)
    ]  # fmt: skip
    assert requeue_seconds(instances, waits) == seconds
