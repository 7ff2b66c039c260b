"""Workspace → pod through the reconciler, against creating the same pods directly.

Both halves run against the in-repo Kubernetes API test server in one process, with the same
client and the same concurrency (the manager's ``--max-concurrent-reconciles`` workers vs as
many direct creators), so the ratio is the reconciler's overhead: the finalizer, PVC, service
account and status writes, the cache round trips and the work queue.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import client

from bench.table import Row
from controller.runtime.informer import Informer
from controller.settings import ControllerSettings, RuntimeSettings, WorkspaceSettings
from controller.setup import new_manager
from controller.workspace import wiring
from controller.workspace.pod import desired_pod
from tests.kubeapi import KubeServer
from wspin.resources import NAMESPACES, PODS, WORKSPACES, Kube

COUNT = 1000
WORKERS = RuntimeSettings().max_concurrent_reconciles
SETTINGS = WorkspaceSettings(default_runtime_class="gvisor")


def _workspace(name: str, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtime": "python", "storage": {"size": "1Gi"}},
    }


async def _in_parallel(count: int, workers: int, job: Callable[[int], Awaitable[None]]) -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            await job(queue.get_nowait())

    await asyncio.gather(*(worker() for _ in range(workers)))


async def _direct(kube: Kube, namespace: str) -> float:
    """The baseline: the same pod bodies, created straight through the client."""
    bodies = []
    for i in range(COUNT):
        ws = _workspace(f"ws{i}", namespace)
        ws["metadata"]["uid"] = str(uuid.uuid4())
        bodies.append(desired_pod(ws, SETTINGS))

    async def create(i: int) -> None:
        await kube.create(PODS, bodies[i], namespace)

    started = time.perf_counter()
    await _in_parallel(COUNT, WORKERS, create)
    return time.perf_counter() - started


async def _via_reconciler(kube: Kube, namespace: str) -> float:
    """Workspaces applied first; timed from manager start until every pod exists."""

    async def apply(i: int) -> None:
        await kube.create(WORKSPACES, _workspace(f"ws{i}", namespace))

    await _in_parallel(COUNT, WORKERS, apply)
    pods = Informer(kube, PODS, namespace=namespace)
    all_there = asyncio.Event()
    pods.add_handler(lambda *_: all_there.set() if len(pods) >= COUNT else None)
    watching = asyncio.create_task(pods.run())
    await pods.wait_synced()
    settings = ControllerSettings(
        runtime=RuntimeSettings(health_port=0, metrics_port=0, bind_host="127.0.0.1"),
        workspace=SETTINGS,
    )
    manager = new_manager(kube, settings)
    wiring.register(manager, settings)
    started = time.perf_counter()
    running = asyncio.create_task(manager.run())
    try:
        await all_there.wait()
        return time.perf_counter() - started
    finally:
        manager.stop()
        await running
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)


async def _run() -> tuple[float, float]:
    async with KubeServer() as server:
        configuration = client.Configuration()
        configuration.host = server.url
        async with client.ApiClient(configuration) as api:
            kube = Kube(api)
            for name in ("bench-direct", "bench-workspaces"):
                await kube.create(NAMESPACES, {"metadata": {"name": name}})
            direct = await _direct(kube, "bench-direct")
            reconciled = await _via_reconciler(kube, "bench-workspaces")
    return direct, reconciled


def bench_workspace_pods() -> list[Row]:
    """1,000 Workspaces to pods through the reconciler vs 1,000 pods created directly."""
    direct, reconciled = asyncio.run(_run())
    return [
        Row(
            f"time for {COUNT} Workspaces to get pods, vs {COUNT} direct pod creates",
            reconciled / direct,
            "-",
            f"reconciler {reconciled:.2f} s, direct {direct:.2f} s, {WORKERS} workers each "
            "(~5 API writes per Workspace vs 1)",
        )
    ]
