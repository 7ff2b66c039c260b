"""Why a workspace pod is recycled: one reason for its staleness and for the drain metrics."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controller.settings import WorkspaceSettings
from controller.workspace.agent import drain
from controller.workspace.agent.metrics import DRAIN_REASONS, USER_FORCED, AgentMetrics
from controller.workspace.pod.builder import desired_pod
from controller.workspace.pod.names import PodBuildError
from controller.workspace.pod.recycle import (
    RecycleReason,
    pod_is_stale,
    recycle_reason,
    stale_reason,
)
from tests.controller.workspace.factories import AGENTD_IMAGE, credentials, workspace
from wspin.core.delivery import AgentdDelivery

SETTINGS = WorkspaceSettings(agentd=AgentdDelivery(image=AGENTD_IMAGE))


def pod(**spec: Any) -> dict[str, Any]:
    """The pod built for a Workspace with ``spec``."""
    return desired_pod(workspace(**spec), SETTINGS, credentials=credentials())


CASES = [
    # (built for, Workspace now, stale reason, its words)
    ({}, {}, None, None),
    ({"restartGeneration": 3}, {"restartGeneration": 3}, None, None),
    (
        {},
        {"restartGeneration": 1},
        RecycleReason.RESTART_GENERATION,
        "restartGeneration changed to 1",
    ),
    (
        {},
        {"architecture": "arm64"},
        RecycleReason.ARCHITECTURE_DRIFT,
        "architecture changed to arm64",
    ),
    # Both changed: the restart generation is the reason (it is asked first).
    (
        {},
        {"restartGeneration": 2, "architecture": "arm64"},
        RecycleReason.RESTART_GENERATION,
        "restartGeneration changed to 2",
    ),
]


@pytest.mark.parametrize(("built", "now", "reason", "words"), CASES)
def test_staleness_and_its_words_come_from_one_reason(
    built: dict[str, Any], now: dict[str, Any], reason: RecycleReason | None, words: str | None
) -> None:
    assert stale_reason(pod(**built), workspace(**now)) is reason
    assert pod_is_stale(pod(**built), workspace(**now)) == words


@pytest.mark.parametrize(("built", "now", "reason", "words"), [c for c in CASES if c[2]])
def test_a_drain_is_labelled_with_the_reason_that_made_the_pod_stale(
    built: dict[str, Any], now: dict[str, Any], reason: RecycleReason, words: str
) -> None:
    stale, ws = pod(**built), workspace(**now)
    assert drain.reason_of(stale, ws, untrusted=False) is reason
    assert recycle_reason(stale, ws, untrusted=False) is reason


def test_credentials_it_cannot_vouch_for_are_the_reason_whatever_else_changed() -> None:
    stale = pod()
    assert drain.reason_of(stale, workspace(restartGeneration=1), untrusted=True) is (
        RecycleReason.CREDENTIALS
    )
    assert drain.reason_of(stale, workspace(), untrusted=True) is RecycleReason.CREDENTIALS


def test_a_malformed_restart_generation_fails_the_build_naming_the_field() -> None:
    with pytest.raises(PodBuildError, match=r"spec\.restartGeneration .*got -1"):
        stale_reason(pod(), workspace(restartGeneration=-1))
    with pytest.raises(PodBuildError, match=r"spec\.architecture 's390x' is not supported"):
        stale_reason(pod(), workspace(architecture="s390x"))


def test_the_drain_metrics_keep_their_label_values() -> None:
    assert [str(reason) for reason in DRAIN_REASONS] == [
        "restart_generation",
        "architecture_drift",
        "credentials",
    ]
    assert f"{USER_FORCED}" == "restart_generation_user_forced"
    registry = CollectorRegistry()
    metrics = AgentMetrics(registry)
    metrics.drain_deferred.labels(RecycleReason.ARCHITECTURE_DRIFT).inc()
    labelled = {
        (sample.name, sample.labels.get("reason"))
        for family in registry.collect()
        for sample in family.samples
        if sample.name.startswith("llmsafespaces_workspace_drain_")
    }
    for reason in ("restart_generation", "architecture_drift", "credentials"):
        assert ("llmsafespaces_workspace_drain_deferred_total", reason) in labelled
        assert ("llmsafespaces_workspace_drain_failed_open_total", reason) in labelled
    assert (
        "llmsafespaces_workspace_drain_forced_total",
        "restart_generation_user_forced",
    ) in labelled
    assert (
        registry.get_sample_value(
            "llmsafespaces_workspace_drain_deferred_total", {"reason": "architecture_drift"}
        )
        == 1
    )
