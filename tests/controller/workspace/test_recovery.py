"""The recovery policy and its status record: the backoff schedules, exhaustion, the stability
window, starting over, and the fields written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controller.workspace.recovery import failures as fl
from controller.workspace.recovery.decision import Counted, Exhausted, assess_missing
from controller.workspace.recovery.policy import (
    RECOVERY_EXHAUSTED,
    STABILITY_WINDOW,
    RecoveryState,
    apply,
    policy,
    settle,
    stability,
)
from wspin.core.objects import Obj

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("failure_class", "schedule"),
    [
        ("Infrastructure", [5, 10, 20, 40, 80, 120, 120, 120, 120, 120]),
        ("Resource", [10, 20, 40, 80, 160, 300, 300]),
        ("Process", [10, 20, 40, 80, 160, 300, 300]),
        ("Configuration", [30, 60, 120, 240, 300, 300]),
    ],
)
def test_each_class_backs_off_from_its_base_to_its_cap(
    failure_class: str, schedule: list[int]
) -> None:
    rule = policy(failure_class)
    assert [rule.backoff(n) for n in range(1, len(schedule) + 1)] == schedule
    assert rule.backoff(0) == 0
    assert rule.backoff(10_000) == rule.cap  # the exponent is bounded


@pytest.mark.parametrize(
    ("failure_class", "threshold"),
    [("Infrastructure", 10), ("Resource", 6), ("Process", 6), ("Configuration", 3)],
)
def test_each_class_is_exhausted_after_its_threshold(failure_class: str, threshold: int) -> None:
    assert policy(failure_class).exhausted_after == threshold


def test_an_unknown_class_from_a_hand_edited_status_is_retried_as_a_process_failure() -> None:
    assert policy("Cosmic") == policy("Process")


def test_recording_a_failure_schedules_its_retry_and_ends_the_stable_stretch() -> None:
    state = RecoveryState(failures=2, failure_class="Process", last_stable_at=NOW, attempts=7)
    after = state.record(fl.Failure("Process", "CrashLoopBackOff"), 1, NOW)
    assert after.failures == 3 and after.attempts == 8
    assert after.next_retry_at == NOW + timedelta(seconds=40)
    assert after.last_failure_at == NOW and after.last_stable_at is None


def test_the_status_round_trips_and_a_spec_change_starts_over() -> None:
    state = RecoveryState(
        failures=4,
        failure_class="Configuration",
        last_failure_at=NOW,
        next_retry_at=NOW + timedelta(seconds=240),
        attempts=9,
        pod="uid-1",
        pod_exits=2,
        pod_failed=True,
    )
    status: Obj = {"observedGeneration": 3, "conditions": []}
    apply(status, state)
    assert status["consecutiveFailures"] == 4
    assert status["lastFailureClass"] == "Configuration"
    assert status["nextRetryAt"] == "2026-11-29T12:04:00Z"
    assert status["lastFailedPod"] == {"uid": "uid-1", "containerExits": 2, "podFailed": True}
    assert RecoveryState.of(status, 3) == state
    renewed = RecoveryState.of(status, 4)  # metadata.generation moved on: a new spec
    assert (renewed.failures, renewed.next_retry_at, renewed.attempts) == (0, None, 9)
    assert renewed.failed("uid-1") and renewed.exits("uid-1") == 2  # counted stays counted


def test_clearing_removes_the_fields_the_exhausted_condition_and_zeroes_health_restarts() -> None:
    status: Obj = {
        "consecutiveFailures": 6,
        "lastFailureClass": "Process",
        "nextRetryAt": "2026-11-29T12:05:00Z",
        "controllerRestartCount": 2,
        "conditions": [{"type": RECOVERY_EXHAUSTED, "status": "True"}, {"type": "Ready"}],
    }
    apply(status, settle(status, 1, None, "Suspended"))
    assert "consecutiveFailures" not in status and "nextRetryAt" not in status
    assert status["controllerRestartCount"] == 0
    assert [c["type"] for c in status["conditions"]] == ["Ready"]


def test_the_stable_stretch_starts_then_clears_after_the_window() -> None:
    state = RecoveryState(failures=3, failure_class="Process", last_failure_at=NOW)
    started, wait = stability(state, {}, NOW)
    assert started.last_stable_at == NOW and wait == STABILITY_WINDOW
    still, wait = stability(started, {}, NOW + timedelta(seconds=90))
    assert still.failures == 3 and wait == 30
    cleared, wait = stability(started, {}, NOW + timedelta(seconds=STABILITY_WINDOW))
    assert cleared.failures == 0 and cleared.restarts_cleared and wait is None


def test_health_restarts_alone_start_a_stable_stretch_too() -> None:
    started, wait = stability(RecoveryState(), {"controllerRestartCount": 2}, NOW)
    assert started.last_stable_at == NOW and wait == STABILITY_WINDOW
    assert stability(RecoveryState(), {}, NOW) == (RecoveryState(), None)


def test_leaving_active_ends_the_stable_stretch() -> None:
    state = RecoveryState(failures=1, failure_class="Process", last_stable_at=NOW)
    assert settle({}, 1, state, "Creating").last_stable_at is None
    assert settle({}, 1, state, "Active").last_stable_at == NOW


def lost_status(failures: int, *, exhausted: bool = False) -> Obj:
    status: Obj = {"phase": "Active", "observedGeneration": 1, "conditions": []}
    if failures:
        status["consecutiveFailures"], status["lastFailureClass"] = failures, "Infrastructure"
    if exhausted:
        status["conditions"].append({"type": RECOVERY_EXHAUSTED, "status": "True"})
    return status


def test_a_pod_lost_while_active_is_an_infrastructure_failure_that_waits_its_backoff() -> None:
    decided = assess_missing(lost_status(0), 1, "Active", NOW)
    assert decided.state.failures == 1 and decided.state.failure_class == "Infrastructure"
    assert decided.due == 5 and decided.reason == "PodLost"
    assert decided.notices == [Counted("Infrastructure", (5.0,), "PodLost")]


@pytest.mark.parametrize(
    ("before", "exhausted", "crossing"),
    [(8, False, False), (9, False, True), (10, True, False), (0, True, False)],
    ids=["ninth", "tenth-crosses", "eleventh-already-reported", "after-a-clear"],
)
def test_the_infrastructure_threshold_is_crossed_once_at_the_tenth_failure(
    before: int, exhausted: bool, crossing: bool
) -> None:
    decided = assess_missing(lost_status(before, exhausted=exhausted), 1, "Active", NOW)
    crossings = [n for n in decided.notices if isinstance(n, Exhausted)]
    assert bool(crossings) == crossing
    assert any(c["type"] == RECOVERY_EXHAUSTED for c in decided.conditions) == crossing
    if crossing:
        assert crossings[0].failures == 10
        assert "retries continue" in crossings[0].message and "spec.suspend" in crossings[0].message


def test_a_retry_not_due_yet_holds_the_pod_and_keeps_the_reason_then_goes() -> None:
    status = lost_status(2)
    status.update(
        phase="Creating",
        nextRetryAt="2026-11-29T12:00:10Z",
        reason="PodEvicted",
        message="the workspace pod was stopped (Evicted)",
    )
    waiting = assess_missing(status, 1, "Creating", NOW)
    assert waiting.due == 10 and waiting.reason == "PodEvicted" and not waiting.notices
    due = assess_missing(status, 1, "Creating", NOW + timedelta(seconds=10))
    assert due.due is None and due.state.next_retry_at is None and due.reason == ""
