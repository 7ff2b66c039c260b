"""The status a pass writes: Ready, the routing fields and their set/clear rules, and the
toolkit's conditions (transition times kept, patches only on change)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, get_args

import pytest

from controller.toolkit.conditions import condition, set_condition
from controller.toolkit.status import status_patch
from controller.workspace.pod.facts import image_tag, pod_facts
from controller.workspace.pod.phase import POD_BUILD_FAILED, TRANSIENT_POD_LOSS
from controller.workspace.reconcile.plan import Plan
from controller.workspace.reconcile.record import endpoint, next_status, ready_condition
from tests.controller.workspace.factories import workspace
from tests.controller.workspace.lifecycle_pods import READY
from wspin.core.fleet import Phase
from wspin.core.objects import Obj

PHASES = get_args(Phase)
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
WS = workspace()


def after(old: Obj, outcome: Plan, at: datetime = NOW) -> Obj:
    return next_status(old, outcome, WS, at)


def active(**fields: Any) -> Plan:
    return Plan("Active", pod=pod_facts(READY), pod_name="ws1-b8985526", **fields)


def ready(status: Obj) -> Obj:
    return next(c for c in status["conditions"] if c["type"] == "Ready")


class TestRouting:
    def test_active_sets_the_ip_the_endpoint_the_tag_and_the_start(self) -> None:
        status = after({"phase": "Creating"}, active())
        assert status["podIP"] == "10.0.0.7"
        assert status["endpoint"] == "http://10.0.0.7:4096"
        assert status["podName"] == "ws1-b8985526" and status["podNamespace"] == "ws-demo"
        assert status["imageTag"] == "python"
        assert status["startTime"] == "2026-11-29T12:00:00Z"
        assert ready(status)["status"] == "True"

    @pytest.mark.parametrize("phase", [p for p in PHASES if p != "Active"])
    def test_every_other_phase_withdraws_the_ip_and_the_endpoint(self, phase: Any) -> None:
        before = after({"phase": "Creating"}, active())
        status = after(before, Plan(phase))
        assert "podIP" not in status and "endpoint" not in status
        assert ready(status)["status"] == "False"
        assert status["imageTag"] == "python"  # never cleared

    def test_an_ipv6_endpoint_is_bracketed(self) -> None:
        assert endpoint("fd00::7") == "http://[fd00::7]:4096"

    def test_the_same_pod_ready_again_keeps_its_start_time_and_a_new_pod_gets_one(self) -> None:
        first = after({"phase": "Creating"}, active())
        unready = after(
            first, Plan("Creating", ready_reason="PodNotReady"), NOW + timedelta(minutes=5)
        )
        again = after(unready, active(), NOW + timedelta(minutes=6))
        assert again["startTime"] == "2026-11-29T12:00:00Z"
        newer = pod_facts(
            {
                **READY,
                "metadata": {**READY["metadata"], "creationTimestamp": "2026-11-29T12:07:00Z"},
            }
        )
        replaced = after(unready, Plan("Active", pod=newer), NOW + timedelta(minutes=8))
        assert replaced["startTime"] == "2026-11-29T12:08:00Z"

    @pytest.mark.parametrize("phase", ["Suspended", "Failed", "Terminated"])
    def test_phases_without_a_pod_drop_its_name(self, phase: Any) -> None:
        status = after(after({}, active()), Plan(phase))
        assert "podName" not in status and "podNamespace" not in status


class TestBookkeeping:
    def test_suspended_at_is_set_on_entering_suspended_and_cleared_on_leaving(self) -> None:
        suspended = after({"phase": "Suspending"}, Plan("Suspended"))
        assert suspended["suspendedAt"] == "2026-11-29T12:00:00Z"
        later = after(suspended, Plan("Suspended"), NOW + timedelta(hours=1))
        assert later["suspendedAt"] == "2026-11-29T12:00:00Z"
        assert "suspendedAt" not in after(later, Plan("Resuming"))

    def test_a_new_restart_generation_counts_one_restart_and_the_first_counts_none(self) -> None:
        first = after({}, Plan("Pending", restart_generation=0))
        assert (first["restartCount"], first["observedRestartGeneration"]) == (0, 0)
        bumped = after(first, Plan("Creating", restart_generation=1))
        assert (bumped["restartCount"], bumped["observedRestartGeneration"]) == (1, 1)
        assert after(bumped, Plan("Creating", restart_generation=1))["restartCount"] == 1
        assert after(bumped, Plan("Creating", restarted=True))["restartCount"] == 2

    def test_a_hand_edited_restart_count_restarts_from_zero(self) -> None:
        assert after({"restartCount": "many"}, Plan("Creating"))["restartCount"] == 0

    def test_a_failure_reason_lasts_until_the_workspace_is_active_again(self) -> None:
        lost = after({"phase": "Active"}, Plan("Creating", failure_reason=TRANSIENT_POD_LOSS))
        assert lost["failureReason"] == TRANSIENT_POD_LOSS
        assert after(lost, Plan("Creating"))["failureReason"] == TRANSIENT_POD_LOSS
        assert "failureReason" not in after(lost, active())

    def test_a_build_failure_is_cleared_once_the_pod_builds(self) -> None:
        failed = after(
            {},
            Plan("Failed", reason=POD_BUILD_FAILED, detail="x", failure_reason=POD_BUILD_FAILED),
        )
        assert (failed["reason"], failed["failureReason"]) == (POD_BUILD_FAILED, POD_BUILD_FAILED)
        built = after(failed, Plan("Pending"))
        assert "failureReason" not in built and "reason" not in built

    def test_an_unchanged_outcome_needs_no_write(self) -> None:
        status = after({"phase": "Creating"}, active())
        assert status_patch(status, after(status, active(), NOW + timedelta(hours=1))) is None


class TestReady:
    def test_a_cause_makes_even_an_active_workspace_unready(self) -> None:
        outcome = Plan("Active", reason="RuntimeNotFound", detail="spec.runtime 'x'")
        made = ready_condition(outcome, 1)
        assert (made["status"], made["reason"], made["message"]) == (
            "False",
            "RuntimeNotFound",
            "spec.runtime 'x'",
        )

    @pytest.mark.parametrize("phase", PHASES)
    def test_every_phase_has_a_ready_condition(self, phase: Any) -> None:
        assert ready_condition(Plan(phase), 1)["status"] == (
            "True" if phase == "Active" else "False"
        )


class TestImageTag:
    @pytest.mark.parametrize(
        ("image_id", "image", "tag"),
        [
            ("reg/img:ts-1@sha256:x", "reg/img:other", "ts-1"),
            ("reg:5000/img@sha256:x", "reg/img:spec-tag@sha256:y", "spec-tag"),
            ("sha256:x", "reg/img:spec-tag", "spec-tag"),
            ("", "python:3.12", "3.12"),
            ("", "reg/img@sha256:y", "reg/img@sha256:y"),
        ],
    )
    def test_the_tag_comes_from_the_image_id_then_the_spec_then_the_image(
        self, image_id: str, image: str, tag: str
    ) -> None:
        assert image_tag(image_id, image) == tag


class TestConditions:
    def test_restating_a_condition_keeps_its_transition_time(self) -> None:
        first = set_condition([], condition("Ready", "False", "PodStarting"), "T1")
        again = set_condition(first, condition("Ready", "False", "PodStarting"), "T2")
        assert again == first

    def test_a_status_change_moves_the_transition_time(self) -> None:
        first = set_condition([], condition("Ready", "False", "PodStarting"), "T1")
        flipped = set_condition(first, condition("Ready", "True", "PodReady"), "T2")
        assert flipped[0]["lastTransitionTime"] == "T2"

    def test_other_condition_types_keep_their_place(self) -> None:
        start = [{"type": "Custom", "status": "True"}]
        out = set_condition(start, condition("Ready", "True", "PodReady"), "T")
        assert [c["type"] for c in out] == ["Custom", "Ready"]

    def test_an_unchanged_status_needs_no_patch_and_dropped_keys_become_null(self) -> None:
        assert status_patch({"phase": "Active"}, {"phase": "Active"}) is None
        assert status_patch({"phase": "Failed", "reason": "x"}, {"phase": "Creating"}) == {
            "phase": "Creating",
            "reason": None,
        }
