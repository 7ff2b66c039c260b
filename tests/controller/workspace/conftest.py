"""A Workspace reconciler over live informer caches against the Kubernetes API (test server,
or a real cluster with ``WSPIN_TEST_KUBECONFIG``), driven one reconcile at a time."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jsonpatch
import pytest
from prometheus_client import CollectorRegistry

from controller.settings import WorkspaceSettings
from controller.types import ObjectKey, Requeue
from controller.workspace.lifecycle_metrics import LifecycleMetrics
from controller.workspace.metrics import VerifyMetrics
from controller.workspace.pod import desired_pod
from controller.workspace.reconciler import WorkspaceReconciler
from controller.workspace.recovery_metrics import RecoveryMetrics
from tests.controller.workspace.factories import (
    AGENTD_IMAGE,
    OPENCODE_IMAGE,
    TEST_KEYS,
    credentials,
)
from tests.support.clock import FakeClock
from tests.support.waiting import eventually
from webhook.inject import InjectConfig, inject
from wspin.core.contract import (
    AGENTD,
    LABEL_APP,
    LABEL_APP_VALUE,
    LABEL_COMPONENT,
    LABEL_COMPONENT_VALUE,
    OPENCODE,
)
from wspin.core.delivery import AgentdDelivery, OpencodeDelivery, PinSet, ResolvedArtifact
from wspin.core.kinds import PODS, PVCS, WORKSPACES
from wspin.kube.client import Kube
from wspin.kube.informer import Informer

Obj = dict[str, Any]
SETTINGS = WorkspaceSettings(
    default_runtime_class="gvisor",
    termination_grace=3,
    agentd=AgentdDelivery(AGENTD_IMAGE),
    opencode=OpencodeDelivery(OPENCODE_IMAGE),
)
INJECT = InjectConfig(
    agentd=ResolvedArtifact(AGENTD, AGENTD_IMAGE, PinSet("a" * 64, "b" * 64)),
    opencode=ResolvedArtifact(OPENCODE, OPENCODE_IMAGE, PinSet("c" * 64, "d" * 64)),
)


def injected(pod: Obj) -> Obj:
    """``pod`` as the admission webhook returns it (the real injector's patch applied)."""
    ops = [dict(op) for op in inject(copy.deepcopy(pod), INJECT).patch]
    result: Obj = jsonpatch.apply_patch(pod, ops)
    return result


@dataclass
class Harness:
    kube: Kube
    namespace: str
    reconciler: WorkspaceReconciler
    workspaces: Informer
    pods: Informer
    pvcs: Informer
    registry: CollectorRegistry
    clock: FakeClock
    """The reconciler's clock (2026-11-29 12:00 UTC until a test moves it)."""

    def key(self, name: str = "ws1") -> ObjectKey:
        return ObjectKey(self.namespace, name)

    async def apply(self, name: str = "ws1", **spec: Any) -> Obj:
        body: Obj = {"runtime": "python", "storage": {"size": "10Gi"}}
        body.update(spec)
        created = await self.kube.create(
            WORKSPACES, {"metadata": {"name": name, "namespace": self.namespace}, "spec": body}
        )
        await self.synced(self.workspaces, name, created)
        return created

    async def synced(self, informer: Informer, name: str, obj: Obj | None) -> None:
        """Wait until ``informer`` holds ``obj``'s version (None: until the name is gone)."""
        version = obj["metadata"]["resourceVersion"] if obj else None

        def caught_up() -> bool:
            cached = informer.get(ObjectKey(self.namespace, name))
            if version is None:
                return cached is None
            return cached is not None and int(cached["metadata"]["resourceVersion"]) >= int(version)

        await eventually(caught_up, f"{informer.name} to see {name}")

    async def reconcile(self, name: str = "ws1") -> Requeue | None:
        """One reconcile, then wait until every cache shows what it wrote."""
        result = await self.reconciler.reconcile(self.key(name))
        await self.settle(name)
        return result

    async def settle(self, name: str = "ws1") -> None:
        ws = await self.kube.get_or_none(WORKSPACES, name, self.namespace)
        await self.synced(self.workspaces, name, ws)
        if ws is not None and ws["metadata"].get("uid"):
            pod_name = f"{name}-{ws['metadata']['uid'][:8]}"
            await self.synced(
                self.pods, pod_name, await self.kube.get_or_none(PODS, pod_name, self.namespace)
            )

    async def workspace(self, name: str = "ws1") -> Obj:
        return await self.kube.get(WORKSPACES, name, self.namespace)

    async def pod_name(self, name: str = "ws1") -> str:
        uid = (await self.workspace(name))["metadata"]["uid"]
        return f"{name}-{uid[:8]}"

    async def create_pod(self, *, inject: bool = True) -> str:
        """Play the admission webhook: create the reconciler's pod (on ``node-a``) with
        delivery injected (``inject``), before the reconciler does."""
        ws = await self.workspace()
        pod = desired_pod(ws, SETTINGS, credentials=credentials(ws))
        if inject:
            pod = injected(pod)
        pod["spec"]["nodeName"] = "node-a"
        created = await self.kube.create(PODS, pod, self.namespace)
        await self.synced(self.pods, created["metadata"]["name"], created)
        return str(created["metadata"]["name"])

    async def set_pod_status(self, pod_name: str, status: Obj) -> None:
        pod = await self.kube.patch(
            PODS, pod_name, {"status": status}, self.namespace, sub="status"
        )
        await self.synced(self.pods, pod_name, pod)


@pytest.fixture
async def harness(kube: Kube, namespace: str) -> AsyncIterator[Harness]:
    selector = f"{LABEL_APP}={LABEL_APP_VALUE},{LABEL_COMPONENT}={LABEL_COMPONENT_VALUE}"
    workspaces = Informer(kube, WORKSPACES, namespace=namespace)
    pods = Informer(kube, PODS, namespace=namespace, labels=selector)
    pvcs = Informer(kube, PVCS, namespace=namespace)
    tasks = [asyncio.create_task(i.run()) for i in (workspaces, pods, pvcs)]
    registry = CollectorRegistry()
    clock = FakeClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))
    reconciler = WorkspaceReconciler(
        kube,
        workspaces,
        pods,
        pvcs,
        SETTINGS,
        keys=TEST_KEYS,
        metrics=VerifyMetrics(registry),
        clock=clock,
        recovery=RecoveryMetrics(registry),
        lifecycle=LifecycleMetrics(registry),
    )
    try:
        for informer in (workspaces, pods, pvcs):
            await asyncio.wait_for(informer.wait_synced(), 10)
        yield Harness(kube, namespace, reconciler, workspaces, pods, pvcs, registry, clock)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
