"""The Workspace controller registered on a running manager: apply a Workspace, get a pod."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from controller.settings import ControllerSettings, RuntimeSettings
from controller.setup import new_manager
from controller.workspace import wiring
from tests.controller.workspace.conftest import SETTINGS
from tests.controller.workspace.factories import TEST_KEYS, publish_runtime
from tests.support.waiting import eventually
from wspin.core.kinds import PODS, WORKSPACES
from wspin.kube.client import Kube


async def test_a_registered_controller_turns_an_applied_workspace_into_a_pod(
    kube: Kube, namespace: str
) -> None:
    settings = ControllerSettings(
        runtime=RuntimeSettings(health_port=0, metrics_port=0, bind_host="127.0.0.1"),
        workspace=SETTINGS,
    )
    await publish_runtime(kube)
    registry = CollectorRegistry()
    manager = new_manager(kube, settings, registry=registry)
    wiring.register(manager, settings, keys=TEST_KEYS)
    assert (
        registry.get_sample_value(
            "llmsafespaces_workspace_agentd_verify_failures_total",
            {"outcome": "x", "node": "y", "agentd": "z"},
        )
        is None
    )  # registered on the manager's registry, no series yet
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

        async def pod_and_status() -> bool:
            pod = await kube.get_or_none(PODS, pod_name, namespace)
            current = await kube.get(WORKSPACES, "ws1", namespace)
            return pod is not None and current.get("status", {}).get("podName") == pod_name

        await eventually(pod_and_status, "the manager to create the workspace pod")
        assert "llmsafespaces_workspace_agentd_verify_failures_total" in {
            metric.name + "_total" for metric in registry.collect()
        }
    finally:
        manager.stop()
        await asyncio.wait_for(running, 10)
