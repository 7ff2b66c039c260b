"""The Workspace controller as the manager runs it: woken by events and deadlines only.

A steady state makes no request at all; a namespace deleted under 200 Workspaces is quiet
(no warning, no traceback, no retry storm) and still honours every Workspace's finalizer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

import pytest

from controller.runtime.manager import Manager
from controller.settings import ControllerSettings, RuntimeSettings
from controller.types import ObjectKey
from controller.workspace import wiring
from controller.workspace.reconciler import FINALIZER
from tests.controller.workspace.conftest import SETTINGS
from tests.controller.workspace.factories import publish_runtime
from tests.kubeapi import KubeServer
from wspin.core.kinds import NAMESPACES, PODS, WORKSPACES
from wspin.kube.client import Kube

CONTROLLER = ControllerSettings(
    runtime=RuntimeSettings(health_port=0, metrics_port=0, bind_host="127.0.0.1"),
    workspace=SETTINGS,
)
FORMER_POLL = 2.0
"""Seconds between the reconciles every Pending Workspace used to get with no event."""


async def eventually(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll ``check`` until true; a bound, not a speed test."""
    try:
        async with asyncio.timeout(timeout):
            while not check():
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


@contextlib.asynccontextmanager
async def controller(kube: Kube) -> AsyncIterator[Manager]:
    await publish_runtime(kube)
    manager = Manager(kube, CONTROLLER.runtime)
    wiring.register(manager, CONTROLLER)
    task = asyncio.create_task(manager.run())
    try:
        await eventually(lambda: manager.is_leader or task.done(), "the manager to lead")
        yield manager
    finally:
        manager.stop()
        await asyncio.wait_for(task, 30)


def workspace(name: str, namespace: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtime": "python", "storage": {"size": "1Gi"}},
    }


def reconciles(manager: Manager) -> float:
    total = 0.0
    for result in ("success", "requeue_after", "error", "terminal_error"):
        sample = manager.registry.get_sample_value(
            "wspin_controller_reconcile_total", {"controller": "workspace", "result": result}
        )
        total += sample or 0.0
    return total


async def quiet(server: KubeServer, *, for_seconds: float) -> None:
    """Wait until no request arrived for ``for_seconds`` (the controller settled)."""
    seen = -1
    while seen != len(server.requests):
        seen = len(server.requests)
        await asyncio.sleep(for_seconds)


async def test_a_steady_state_of_pending_and_active_workspaces_makes_no_request(
    kube: Kube, kube_server: KubeServer, namespace: str
) -> None:
    for name in ("pending", "active"):
        await kube.create(WORKSPACES, workspace(name, namespace))
    async with controller(kube) as manager:
        cache = manager.cache(WORKSPACES)

        def phase(name: str) -> str:
            ws = cache.get(ObjectKey(namespace, name)) or {}
            return str((ws.get("status") or {}).get("phase", ""))

        await eventually(lambda: phase("pending") == phase("active") == "Pending", "pods")
        active = cache.get(ObjectKey(namespace, "active"))
        assert active is not None
        pod = f"active-{active['metadata']['uid'][:8]}"
        ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        await kube.patch(PODS, pod, {"status": ready}, namespace, sub="status")
        await eventually(lambda: phase("active") == "Active", "the Active phase")
        await quiet(kube_server, for_seconds=0.5)

        kube_server.requests.clear()
        before = reconciles(manager)
        await asyncio.sleep(3 * FORMER_POLL)
        assert kube_server.requests == [], "a steady state asks the API server nothing"
        assert reconciles(manager) == before, "and reconciles nothing"
        assert phase("pending") == "Pending"


async def test_deleting_the_namespace_of_200_workspaces_logs_no_warning_and_releases_each(
    kube: Kube, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    count = 200
    await asyncio.gather(
        *(kube.create(WORKSPACES, workspace(f"w{i}", namespace)) for i in range(count))
    )
    async with controller(kube) as manager:
        pods = manager.cache(PODS, labels=wiring.OWNED_SELECTOR)
        workspaces = manager.cache(WORKSPACES)

        def settled() -> bool:
            listed = workspaces.list(namespace)
            return len(pods.list(namespace)) == count and all(
                FINALIZER in (ws["metadata"].get("finalizers") or [])
                and (ws.get("status") or {}).get("phase") == "Pending"
                for ws in listed
            )

        await eventually(settled, "200 pods")
        caplog.clear()
        await kube.delete(NAMESPACES, namespace)

        async def gone() -> bool:
            return await kube.get_or_none(NAMESPACES, namespace) is None

        async with asyncio.timeout(120):
            while not await gone():
                await asyncio.sleep(0.1)
        await eventually(lambda: workspaces.list(namespace) == [], "the cache to see them go")

    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == [], [f"{r.name}: {r.getMessage()}" for r in loud[:5]]
    assert not any(r.exc_info for r in caplog.records), "no traceback for an expected answer"
    released = [r for r in caplog.records if r.getMessage() == "workspace deleted"]
    assert len(released) == count, "every finalizer was released by the controller"
