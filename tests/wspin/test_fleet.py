"""``wspin.core.fleet``: how Workspaces are counted, and why the counts cannot explode."""

from __future__ import annotations

from typing import Any

import yaml

from controller.staging import conditions as staging
from controller.workspace.egress.sync import EGRESS_CONDITION
from controller.workspace.recovery import boot, policy, verify
from tests.chart.helm import CHART
from tests.support.owners import recorded
from wspin.core import fleet
from wspin.core.contract import ARTIFACTS
from wspin.core.owners import ANNOTATION_VERIFIED_OWNER


def workspace(
    phase: str | None = None,
    runtime: Any = "python",
    conditions: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": conditions or []}
    if phase is not None:
        status["phase"] = phase
    return {"metadata": {"name": "ws"}, "spec": {"runtime": runtime, **spec}, "status": status}


def test_the_phases_are_the_crds_enum() -> None:
    crd = yaml.safe_load((CHART / "crds" / "workspaces.llmsafespaces.dev.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert tuple(schema["properties"]["status"]["properties"]["phase"]["enum"]) == fleet.PHASES


def test_the_conditions_are_the_ones_the_controller_writes() -> None:
    written = {staging.STAGED, staging.STALE, staging.REJECTED, EGRESS_CONDITION, "Ready"}
    written |= {boot.BOOT_READY, policy.RECOVERY_EXHAUSTED}
    written |= {verify.condition_type(artifact) for artifact in ARTIFACTS}
    assert written == set(fleet.CONDITIONS)


def test_every_phase_is_counted_and_a_workspace_without_one_is_pending() -> None:
    counts = fleet.phase_counts(
        [workspace("Active"), workspace("Active"), workspace(None), workspace("Suspended")]
    )
    assert counts == {
        "Pending": 1,
        "Creating": 0,
        "Active": 2,
        "Suspending": 0,
        "Suspended": 1,
        "Resuming": 0,
        "Terminating": 0,
        "Terminated": 0,
        "Failed": 0,
    }


def test_a_phase_outside_the_enum_is_unknown_whatever_it_says() -> None:
    counts = fleet.phase_counts([workspace(f"Phase{i}") for i in range(50)] + [workspace(7)])  # type: ignore[arg-type]
    assert counts["Unknown"] == 51
    assert len(counts) == len(fleet.PHASES) + 1


def test_running_counts_active_workspaces_by_bounded_runtime_and_security_level() -> None:
    workspaces = [
        workspace("Active", "python", securityLevel="high"),
        workspace("Active", "python", securityLevel="high"),
        workspace("Active", "ghcr.io/acme/runtime@sha256:" + "e" * 64),
        workspace("Active", "Not A Name!", securityLevel="x" * 500),
        workspace("Active", None),
        workspace("Creating", "python"),
    ]
    assert fleet.running_counts(workspaces) == {
        ("python", "high"): 2,
        ("image", "none"): 1,
        ("other", "none"): 1,
        ("none", "none"): 1,
    }


def condition(type_: str, status: str, reason: Any) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason}


def test_conditions_are_counted_by_type_status_and_reason() -> None:
    workspaces = [
        workspace("Active", conditions=[condition("CredentialsStaged", "False", "StageFailed")]),
        workspace("Active", conditions=[condition("CredentialsStaged", "False", "StageFailed")]),
        workspace(
            "Active",
            conditions=[
                condition("CredentialsStaged", "True", "CredentialsStaged"),
                condition("SomethingElse", "True", "Whatever"),
            ],
        ),
    ]
    assert fleet.condition_counts(workspaces) == {
        ("CredentialsStaged", "False", "StageFailed"): 2,
        ("CredentialsStaged", "True", "CredentialsStaged"): 1,
    }


def test_hostile_reasons_and_statuses_collapse_into_a_bounded_set() -> None:
    conditions = [condition("Ready", "False", f"Reason{i}") for i in range(200)]
    conditions += [
        condition("Ready", "False", "x" * 100),
        condition("Ready", "False", "has spaces"),
        condition("Ready", "Maybe", ["not", "a", "string"]),
        "not a condition",  # type: ignore[list-item]
    ]
    counts = fleet.condition_counts([workspace("Active", conditions=conditions)])
    false = {reason: n for (_, status, reason), n in counts.items() if status == "False"}
    assert len(false) == fleet.MAX_REASONS + 1
    assert false["Other"] == 202 - fleet.MAX_REASONS
    assert counts[("Ready", "Unknown", "Other")] == 1
    assert sum(counts.values()) == 203


def test_the_owner_a_workspace_is_metered_to_is_its_user_id_or_none() -> None:
    owned = recorded({"spec": {"owner": {"userID": "alice", "orgID": "o"}}})
    assert fleet.owner_user_id(owned) == "alice"
    for broken in (
        {},
        {"spec": None},
        {"metadata": {"annotations": {ANNOTATION_VERIFIED_OWNER: "alice"}}},
        {"metadata": {"annotations": {ANNOTATION_VERIFIED_OWNER: '{"userID": 7}'}}},
    ):
        assert fleet.owner_user_id(broken) == ""


def test_the_user_billed_is_the_one_admission_recorded_never_the_spec_as_written() -> None:
    """A tenant rewriting ``spec.owner.userID`` (or a Workspace admission never saw) must not
    move usage onto someone else's bill."""
    ws: dict[str, Any] = {"spec": {"owner": {"userID": "alice"}}}
    assert fleet.owner_user_id(ws) == ""
    recorded(ws)
    ws["spec"]["owner"]["userID"] = "victim"
    assert fleet.owner_user_id(ws) == "alice"
