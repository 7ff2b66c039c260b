"""Verify-failure detection, pure level: exit codes 81-84 to conditions, Events and metrics."""

from __future__ import annotations

import copy

import pytest

from controller.settings import WorkspaceSettings
from controller.workspace.pod.builder import desired_pod
from controller.workspace.recovery.verify import (
    UNKNOWN,
    detect_failure,
    digest_label,
    event_message,
    has_marker,
    termination_of,
)
from tests.controller.workspace.factories import (
    AGENTD_IMAGE,
    credentials,
    injected,
    with_status,
    workspace,
)
from wspin.core.contract import AGENTD, OPENCODE, Artifact
from wspin.core.delivery import AgentdDelivery

BASE = desired_pod(
    workspace(),
    WorkspaceSettings(agentd=AgentdDelivery(AGENTD_IMAGE)),
    credentials=credentials(),
)
POD = injected(BASE)
EXPECTED = "expected=" + "a" * 64 + " got=" + "f" * 64


@pytest.mark.parametrize(
    ("code", "artifact", "reason", "outcome"),
    [
        (81, AGENTD, "AgentdVerificationFailed", "verify_failed"),
        (82, AGENTD, "AgentdOverlayMissing", "overlay_missing"),
        (83, OPENCODE, "OpencodeVerificationFailed", "verify_failed"),
        (84, OPENCODE, "OpencodeOverlayMissing", "overlay_missing"),
    ],
)
def test_exit_codes_81_to_84_map_to_their_artifact_reason_and_outcome(
    code: int, artifact: Artifact, reason: str, outcome: str
) -> None:
    failure = detect_failure(with_status(POD, exit_code=code, message=f"{reason}: {EXPECTED}"))
    assert failure is not None
    assert failure.artifact == artifact
    assert (failure.kind.reason, failure.kind.outcome) == (reason, outcome)
    assert failure.message == f"{reason}: {EXPECTED}"
    assert failure.node == "node-a"


@pytest.mark.parametrize("code", [0, 1, 87, 88, 137])
def test_other_exit_codes_are_not_verify_failures(code: int) -> None:
    assert detect_failure(with_status(POD, exit_code=code)) is None


def test_an_empty_termination_message_gets_a_generic_one() -> None:
    failure = detect_failure(with_status(POD, exit_code=83))
    assert failure is not None and failure.message == "opencode integrity failure: exit code 83"


def test_a_pod_without_the_marker_is_never_blamed() -> None:
    assert not has_marker(BASE, AGENTD)
    assert detect_failure(with_status(BASE, exit_code=81, message=EXPECTED)) is None


def test_each_artifact_is_gated_on_its_own_marker() -> None:
    agentd_only = injected(BASE, opencode=False)
    assert detect_failure(with_status(agentd_only, exit_code=83)) is None
    assert detect_failure(with_status(agentd_only, exit_code=81)) is not None


@pytest.mark.parametrize("value", ["true", "0", ""])
def test_a_marker_other_than_exactly_1_does_not_count(value: str) -> None:
    pod = copy.deepcopy(POD)
    for env in pod["spec"]["containers"][0]["env"]:
        if env["name"] == AGENTD.marker_env:
            env["value"] = value
    assert not has_marker(pod, AGENTD)


def test_a_current_terminated_state_wins_over_the_last_one() -> None:
    pod = with_status(POD, exit_code=81, current=True)
    pod["status"]["containerStatuses"][0]["lastState"] = {"terminated": {"exitCode": 137}}
    termination = termination_of(pod)
    assert termination is not None and termination.exit_code == 81


def test_the_last_termination_is_used_while_the_container_waits() -> None:
    termination = termination_of(with_status(POD, exit_code=84, restarts=3))
    assert termination is not None
    assert (termination.exit_code, termination.restart_count) == (84, 3)


def test_only_the_workspace_container_status_is_attributed() -> None:
    pod = with_status(POD, exit_code=83)
    sidecar = {"name": "a-first", "state": {"running": {}}, "restartCount": 0}
    other = {"name": "z-last", "state": {"terminated": {"exitCode": 81}}, "restartCount": 0}
    pod["status"]["containerStatuses"] = [sidecar, *pod["status"]["containerStatuses"], other]
    pod["status"]["initContainerStatuses"] = [
        {"name": "platform-init", "state": {"terminated": {"exitCode": 81}}}
    ]
    failure = detect_failure(pod)
    assert failure is not None and failure.exit_code == 83


def test_another_container_listed_first_neither_hides_nor_fakes_a_verify_failure() -> None:
    helper = {"name": "a-helper", "state": {"terminated": {"exitCode": 137}}, "restartCount": 0}
    pod = with_status(POD, exit_code=83)
    pod["status"]["containerStatuses"].insert(0, helper)
    failure = detect_failure(pod)
    assert failure is not None and failure.exit_code == 83

    blamed = dict(helper, state={"terminated": {"exitCode": 81}})
    healthy = with_status(POD, ready=True)
    healthy["status"]["containerStatuses"].insert(0, blamed)
    assert detect_failure(healthy) is None


def test_the_digest_label_comes_from_the_image_volume() -> None:
    assert digest_label(POD, AGENTD) == "0123456789ab"
    assert digest_label(POD, OPENCODE) == "fedcba987654"


def test_the_digest_label_falls_back_to_the_receipt_then_unknown() -> None:
    pod = copy.deepcopy(POD)
    pod["spec"]["volumes"] = [v for v in pod["spec"]["volumes"] if "image" not in v]
    assert digest_label(pod, AGENTD) == "0123456789ab"
    pod["metadata"]["annotations"].pop("llmsafespaces.dev/delivery")
    assert digest_label(pod, AGENTD) == UNKNOWN


def test_the_event_message_names_node_image_restarts_and_the_verifier_text() -> None:
    failure = detect_failure(with_status(POD, exit_code=81, message=EXPECTED, restarts=2))
    assert failure is not None
    message = event_message(failure)
    assert "AgentdVerificationFailed" in message and "expected=" in message
    assert "node=node-a" in message and "restarts=2" in message and "@sha256:0123" in message
