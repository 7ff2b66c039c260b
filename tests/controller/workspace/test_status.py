"""Status helpers: conditions keep their transition time, patches only on change."""

from __future__ import annotations

from typing import Any

from controller.toolkit.conditions import condition, set_condition
from controller.toolkit.status import status_patch
from controller.workspace.status import ready_condition, running_phase
from tests.controller.workspace.factories import with_status

POD: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "workspace"}]}}


def test_restating_a_condition_keeps_its_transition_time() -> None:
    first = set_condition([], condition("Ready", "False", "PodStarting"), "T1")
    again = set_condition(first, condition("Ready", "False", "PodStarting"), "T2")
    assert again == first


def test_a_status_change_moves_the_transition_time() -> None:
    first = set_condition([], condition("Ready", "False", "PodStarting"), "T1")
    flipped = set_condition(first, condition("Ready", "True", "PodReady"), "T2")
    assert flipped[0]["lastTransitionTime"] == "T2"


def test_other_condition_types_keep_their_place() -> None:
    start = [{"type": "Custom", "status": "True"}]
    out = set_condition(start, condition("Ready", "True", "PodReady"), "T")
    assert [c["type"] for c in out] == ["Custom", "Ready"]


def test_the_phase_goes_pending_creating_active_and_an_active_workspace_stays_active() -> None:
    scheduled = {**POD, "spec": {**POD["spec"], "nodeName": "node-a"}}
    assert running_phase(None, "") == "Pending"
    assert running_phase(with_status(POD, phase="Pending"), "Pending") == "Pending"
    assert running_phase(with_status(scheduled, ready=False), "Pending") == "Creating"
    assert running_phase(with_status(scheduled, ready=True), "Creating") == "Active"
    assert running_phase(with_status(scheduled, ready=False, exit_code=81), "Active") == "Active"


def test_a_replaced_pod_keeps_the_workspace_creating() -> None:
    assert running_phase(None, "Active") == "Creating"
    assert running_phase(None, "Suspended") == "Pending"


def test_an_unscheduled_replacement_pod_does_not_move_the_phase_back_to_pending() -> None:
    unscheduled = with_status(POD, phase="Pending")
    assert running_phase(unscheduled, "Creating") == "Creating"
    assert running_phase(unscheduled, "Suspended") == "Pending"


def test_every_phase_has_a_ready_condition() -> None:
    assert ready_condition("Active", 1)["status"] == "True"
    for phase in ("Pending", "Creating", "Suspending", "Suspended", "Terminating", "Failed"):
        assert ready_condition(phase, 1)["status"] == "False"


def test_an_unchanged_status_needs_no_patch_and_dropped_keys_become_null() -> None:
    assert status_patch({"phase": "Active"}, {"phase": "Active"}) is None
    assert status_patch({"phase": "Failed", "reason": "x"}, {"phase": "Creating"}) == {
        "phase": "Creating",
        "reason": None,
    }
