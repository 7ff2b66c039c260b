"""``llmsafespaces_workspace_pods{artifact,digest,state}``: a rollout's progress on /metrics."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.settings import ControllerSettings, RuntimeSettings
from controller.setup import new_manager
from controller.workspace import wiring
from controller.workspace.reconcile.rollout_metrics import (
    WorkspacePodsCollector,
    digest_label,
    served_digests,
)
from tests.controller.workspace.conftest import SETTINGS
from tests.controller.workspace.factories import TEST_KEYS, publish_runtime
from tests.support.waiting import eventually
from wspin.core import rollout
from wspin.core.contract import DELIVERY_ANNOTATION, LABEL_WORKSPACE
from wspin.core.delivery import AgentdDelivery, OpencodeDelivery
from wspin.core.kinds import PODS, WORKSPACES
from wspin.kube.client import Kube

AGENTD_IMAGE = "ghcr.io/example/agentd@sha256:" + "a1" * 32
OPENCODE_IMAGE = "ghcr.io/example/opencode@sha256:" + "b2" * 32
OLD = "sha256:" + "c3" * 32


def samples(registry: CollectorRegistry) -> dict[tuple[str, str, str], float]:
    """The gauge's samples, read back through Prometheus' own text parser."""
    found = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        if family.name == "llmsafespaces_workspace_pods":
            for sample in family.samples:
                labels = sample.labels
                found[(labels["artifact"], labels["digest"], labels["state"])] = sample.value
    return found


class Cached:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def list(self) -> list[dict[str, Any]]:
        return self.items


def pod(name: str, agentd: str, opencode: str, workspace: str = "ws") -> dict[str, Any]:
    receipt = {"agentd": agentd, "opencode": opencode}
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {LABEL_WORKSPACE: workspace},
            "annotations": {DELIVERY_ANNOTATION: json.dumps(receipt)},
        },
        "spec": {
            "volumes": [
                {"name": "agentd", "image": {"reference": f"r@{agentd}"}},
                {"name": "opencode", "image": {"reference": f"r@{opencode}"}},
            ]
        },
    }


def test_the_gauge_counts_pods_per_artifact_digest_and_state() -> None:
    settings = dataclasses.replace(
        SETTINGS, agentd=AgentdDelivery(AGENTD_IMAGE), opencode=OpencodeDelivery(OPENCODE_IMAGE)
    )
    served = served_digests(settings)
    assert served == {"agentd": "sha256:" + "a1" * 32, "opencode": "sha256:" + "b2" * 32}
    current_a, current_o = served["agentd"], served["opencode"]
    pods = [
        pod("p1", current_a, current_o),
        pod("p2", current_a, current_o),
        pod("p3", OLD, current_o),
        {"metadata": {"name": "p4", "namespace": "ns", "labels": {LABEL_WORKSPACE: "x"}}},
    ]
    failing = {
        "metadata": {"name": "ws", "namespace": "ns"},
        "status": {"conditions": [{"type": "OpencodeVerified", "status": "False"}]},
    }
    registry = CollectorRegistry()
    registry.register(WorkspacePodsCollector(Cached(pods), Cached([failing]), served))
    assert samples(registry) == {
        ("agentd", "a1a1a1a1a1a1", "current"): 2,
        ("agentd", "c3c3c3c3c3c3", "stale"): 1,
        ("agentd", "none", "not_injected"): 1,
        ("opencode", "b2b2b2b2b2b2", "failing"): 3,
        ("opencode", "none", "not_injected"): 1,
    }


def test_without_the_release_the_controller_counts_injected_pods_by_digest() -> None:
    assert served_digests(dataclasses.replace(SETTINGS, agentd=None, opencode=None)) is None
    registry = CollectorRegistry()
    registry.register(WorkspacePodsCollector(Cached([pod("p", OLD, OLD)]), Cached([]), None))
    assert samples(registry) == {
        ("agentd", "c3c3c3c3c3c3", "injected"): 1,
        ("opencode", "c3c3c3c3c3c3", "injected"): 1,
    }


async def test_the_running_controller_reports_the_pod_it_created(
    kube: Kube, namespace: str, real_cluster: bool
) -> None:
    workspace = dataclasses.replace(
        SETTINGS, agentd=AgentdDelivery(AGENTD_IMAGE), opencode=OpencodeDelivery(OPENCODE_IMAGE)
    )
    settings = ControllerSettings(
        runtime=RuntimeSettings(health_port=0, metrics_port=0, bind_host="127.0.0.1"),
        workspace=workspace,
    )
    registry = CollectorRegistry()
    await publish_runtime(kube)
    manager = new_manager(kube, settings, registry=registry)
    wiring.register(manager, settings, keys=TEST_KEYS)
    running = asyncio.create_task(manager.run())
    try:
        ws = await kube.create(
            WORKSPACES,
            {
                "metadata": {"name": "ws1", "namespace": namespace},
                "spec": {"runtime": "python", "storage": {"size": "1Gi"}},
            },
        )
        pod_name = f"ws1-{ws['metadata']['uid'][:8]}"

        async def counted() -> bool:
            live = await kube.get_or_none(PODS, pod_name, namespace)
            if live is None:
                return False
            [state] = [
                s
                for s in rollout.classify(live, None, served_digests(workspace))
                if s.artifact == "agentd"
            ]
            found.append(("agentd", digest_label(state.digest), state.state))
            return samples(registry).get(found[-1], 0) >= 1

        found: list[tuple[str, str, str]] = []
        await eventually(counted, "the gauge to count the workspace pod")
        counted_now = samples(registry)[found[-1]]
        # On a shared cluster other tests' workspace pods of the same release count beside it.
        assert counted_now == 1 or (real_cluster and counted_now > 1)
    finally:
        manager.stop()
        await asyncio.wait_for(running, 10)
