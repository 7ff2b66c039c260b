"""The Workspace controller as the manager runs it: woken by events and deadlines only.

A steady state makes no request at all; a namespace deleted under 200 Workspaces is quiet
(no warning, no traceback, no retry storm) and still honours every Workspace's finalizer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import pytest

from controller.runtime.manager import Manager
from controller.settings import ControllerSettings, RuntimeSettings
from controller.types import ObjectKey
from controller.workspace import wiring
from controller.workspace.reconcile.reconciler import FINALIZER
from tests.controller.workspace.conftest import SETTINGS
from tests.controller.workspace.factories import TEST_KEYS, publish_runtime, ready_pod_status
from tests.kubeapi import KubeServer
from tests.support.owners import recorded
from tests.support.waiting import eventually
from wspin.core.kinds import NAMESPACES, PODS, WORKSPACES
from wspin.kube.client import Kube

CONTROLLER = ControllerSettings(
    runtime=RuntimeSettings(health_port=0, metrics_port=0, bind_host="127.0.0.1"),
    workspace=SETTINGS,
)


@contextlib.asynccontextmanager
async def controller(kube: Kube) -> AsyncIterator[Manager]:
    await publish_runtime(kube)
    manager = Manager(kube, CONTROLLER.runtime)
    wiring.register(manager, CONTROLLER, keys=TEST_KEYS)
    task = asyncio.create_task(manager.run())
    try:
        await eventually(lambda: manager.is_leader or task.done(), "the manager to lead")
        yield manager
    finally:
        manager.stop()
        await asyncio.wait_for(task, 30)


def workspace(name: str, namespace: str) -> dict[str, object]:
    return recorded(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"runtime": "python", "storage": {"size": "1Gi"}},
        }
    )


def reconciles(manager: Manager) -> float:
    total = 0.0
    for result in ("success", "requeue_after", "error", "terminal_error"):
        sample = manager.registry.get_sample_value(
            "wspin_controller_reconcile_total", {"controller": "workspace", "result": result}
        )
        total += sample or 0.0
    return total


def settled(manager: Manager, keys: list[ObjectKey]) -> bool:
    """No key is waiting, in flight or due after a delay: without an event, nothing runs."""
    queue = manager.queue_of("workspace")
    return not any(queue.holds(key) for key in keys)


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
        ready = ready_pod_status()
        await kube.patch(PODS, pod, {"status": ready}, namespace, sub="status")
        await eventually(lambda: phase("active") == "Active", "the Active phase")
        keys = [ObjectKey(namespace, name) for name in ("pending", "active")]
        # Settled: no key waits, runs, or is due after a deadline (a periodic poll would
        # show here as a deadline), so nothing will ask the API server anything until an
        # event arrives.
        await eventually(lambda: settled(manager, keys), "the controller to settle")
        kube_server.requests.clear()
        before = reconciles(manager)
        await asyncio.sleep(0.1)  # a beat for anything already on its way
        assert settled(manager, keys)
        assert kube_server.requests == [], "a steady state asks the API server nothing"
        assert reconciles(manager) == before, "and reconciles nothing"
        assert phase("pending") == "Pending"


def by_result(manager: Manager, result: str) -> float:
    sample = manager.registry.get_sample_value(
        "wspin_controller_reconcile_total", {"controller": "workspace", "result": result}
    )
    return sample or 0.0


async def test_a_pod_that_stops_being_ready_shows_on_its_workspace_from_the_pods_own_event(
    kube: Kube, kube_server: KubeServer, namespace: str
) -> None:
    await kube.create(WORKSPACES, workspace("ws1", namespace))
    async with controller(kube) as manager:
        cache = manager.cache(WORKSPACES)

        def status() -> dict[str, object]:
            return dict((cache.get(ObjectKey(namespace, "ws1")) or {}).get("status") or {})

        await eventually(lambda: status().get("phase") == "Pending", "the pod")
        ws = cache.get(ObjectKey(namespace, "ws1"))
        assert ws is not None
        pod = f"ws1-{ws['metadata']['uid'][:8]}"
        await kube.patch(PODS, pod, {"status": ready_pod_status()}, namespace, sub="status")
        await eventually(lambda: status().get("endpoint") == "http://10.0.0.7:4096", "Active")
        key = ObjectKey(namespace, "ws1")
        await eventually(lambda: settled(manager, [key]), "the controller to settle")
        timers = by_result(manager, "requeue_after")

        unready = ready_pod_status()
        unready["conditions"] = [{"type": "Ready", "status": "False"}]
        unready["containerStatuses"][0]["ready"] = False
        await kube.patch(PODS, pod, {"status": unready}, namespace, sub="status")

        def reported() -> bool:
            ready = next(c for c in status()["conditions"] if c["type"] == "Ready")  # type: ignore[attr-defined]
            return bool(ready["status"] == "False" and ready["reason"] == "PodNotReady")

        await eventually(reported, "Ready=False on the Workspace")
        assert status()["phase"] == "Creating" and "podIP" not in status()
        assert by_result(manager, "requeue_after") == timers, "no deadline was involved"


@pytest.mark.timeout(300)  # a cluster's namespace controller takes a minute for 800 objects
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

        # 1,200 writes: a liveness wait, as long as the namespace's deletion below.
        await eventually(settled, "200 pods", timeout=120)
        caplog.clear()
        await kube.delete(NAMESPACES, namespace)

        async def gone() -> bool:
            return await kube.get_or_none(NAMESPACES, namespace) is None

        await eventually(gone, "the namespace to go", timeout=120)
        await eventually(lambda: workspaces.list(namespace) == [], "the cache to see them go")

    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == [], [f"{r.name}: {r.getMessage()}" for r in loud[:5]]
    assert not any(r.exc_info for r in caplog.records), "no traceback for an expected answer"
    # Only this namespace's: on a shared cluster the controller also releases Workspaces of
    # other tests' namespaces being deleted.
    released = [
        r
        for r in caplog.records
        if r.getMessage() == "workspace deleted"
        and str(getattr(r, "fields", {}).get("workspace", "")).startswith(f"{namespace}/")
    ]
    assert len(released) == count, "every finalizer was released by the controller"
