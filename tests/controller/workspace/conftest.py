"""A Workspace reconciler over live informer caches against the Kubernetes API (test server,
or a real cluster with ``WSPIN_TEST_KUBECONFIG``), driven one reconcile at a time."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import jsonpatch
import pytest
from prometheus_client import CollectorRegistry

from controller.settings import WorkspaceSettings
from controller.types import ObjectKey, ObjectReader, Requeue
from controller.workspace.pod import ownership
from controller.workspace.pod.builder import desired_pod
from controller.workspace.pod.names import desired_service_account
from controller.workspace.reconcile.deps import ReconcileDeps
from controller.workspace.reconcile.lifecycle_metrics import LifecycleMetrics
from controller.workspace.reconcile.reconciler import FINALIZER, WorkspaceReconciler
from controller.workspace.recovery.metrics import RecoveryMetrics
from controller.workspace.recovery.verify_metrics import VerifyMetrics
from tests.controller.workspace.factories import (
    AGENTD_IMAGE,
    NODE,
    OPENCODE_IMAGE,
    RUNTIME_CLASS,
    TEST_KEYS,
    create_service_account,
    credentials,
)
from tests.support.clock import FakeClock
from tests.support.owners import recorded
from tests.support.runtime_classes import ensure_node, ensure_runtime_class
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
from wspin.core.errors import AlreadyExists
from wspin.core.kinds import NAMESPACES, PODS, PVCS, SERVICE_ACCOUNTS, WORKSPACES
from wspin.core.objects import Obj
from wspin.core.tenancy import NamespaceLabels, namespace_view
from wspin.kube.client import Kube
from wspin.kube.informer import Informer

SETTINGS = WorkspaceSettings(
    default_runtime_class=RUNTIME_CLASS,
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


def reconcile_deps(
    kube: Kube,
    workspaces: ObjectReader,
    pods: ObjectReader,
    pvcs: ObjectReader,
    settings: WorkspaceSettings = SETTINGS,
    **changes: Any,
) -> ReconcileDeps:
    """What a test reconciler works with: the test settings and key, metrics in a private
    registry, and ``changes`` (any other ``ReconcileDeps`` field)."""
    changes.setdefault("verify_metrics", VerifyMetrics(CollectorRegistry()))
    return ReconcileDeps(kube, workspaces, pods, pvcs, settings, TEST_KEYS, **changes)


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
    namespaces: Informer

    def use(self, **changes: Any) -> WorkspaceReconciler:
        """Reconcile from now on with ``changes`` to the reconciler's dependencies."""
        self.reconciler = WorkspaceReconciler(replace(self.reconciler.deps, **changes))
        return self.reconciler

    def key(self, name: str = "ws1") -> ObjectKey:
        return ObjectKey(self.namespace, name)

    async def label_namespace(self, labels: dict[str, str | None]) -> None:
        """Set (None: remove) labels on the test's namespace, as the platform would, and wait
        until the reconciler's Namespace cache shows them."""
        patched = await self.kube.patch(
            NAMESPACES, self.namespace, {"metadata": {"labels": labels}}
        )
        version = patched["metadata"]["resourceVersion"]

        def caught_up() -> bool:
            cached = self.namespaces.get(ObjectKey("", self.namespace))
            return cached is not None and cached["metadata"]["resourceVersion"] == version

        await eventually(caught_up, f"namespace {self.namespace} labelled in the cache")

    async def apply(
        self, name: str = "ws1", *, vouched: bool = True, finalized: bool = True, **spec: Any
    ) -> Obj:
        """Create the Workspace with the owner record the webhook writes for its spec.owner
        (a trusted writer's, ``vouched``, else the tenant's own), and run the reconciler's
        first pass, which only adds the finalizer (``finalized``); the Workspace as it then
        is."""
        body: Obj = {"runtime": "python", "storage": {"size": "10Gi"}}
        body.update(spec)
        meta = {"name": name, "namespace": self.namespace}
        created = await self.kube.create(
            WORKSPACES, recorded({"metadata": meta, "spec": body}, vouched=vouched)
        )
        await self.synced(self.workspaces, name, created)
        if not finalized:
            return created
        assert await self.reconcile(name) is None
        first = await self.workspace(name)
        assert FINALIZER in first["metadata"].get("finalizers", [])
        return first

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

    async def create_account(self, ws: Obj, *, stamp: bool = True) -> None:
        """Play the controller: the Workspace's service account, which the API server wants
        before any pod naming it (the controller creates it first too); ``stamp=False``: as a
        release before the ownership labels left it."""
        account = desired_service_account(ws)
        if stamp:
            account = ownership.stamp(account, ws)
        with contextlib.suppress(AlreadyExists):
            await self.kube.create(SERVICE_ACCOUNTS, account, self.namespace)

    async def create_pod(self, *, inject: bool = True) -> str:
        """Play the controller and the admission webhook: create the reconciler's pod (on
        ``node-a``), labelled as the controller's, with delivery injected (``inject``), before
        the reconciler does."""
        ws = await self.workspace()
        await create_service_account(self.kube, ws)
        pod = ownership.stamp(desired_pod(ws, SETTINGS, credentials=credentials(ws)), ws)
        if inject:
            pod = injected(pod)
        pod["spec"]["nodeName"] = NODE
        await self.create_account(ws)
        created = await self.kube.create(PODS, pod, self.namespace)
        await self.synced(self.pods, created["metadata"]["name"], created)
        return str(created["metadata"]["name"])

    async def schedule(self, pod_name: str) -> None:
        """Play the scheduler: bind the pod to ``node-a`` (a pod on a node is deleted
        gracefully and stays until its kubelet lets it go; the controller manager's pod GC
        force-deletes an unscheduled pod held in its deletion)."""
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod_name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": NODE},
        }
        await self.kube.request(
            "POST", PODS.path(self.namespace, pod_name, "binding"), body=binding
        )
        await self.synced(self.pods, pod_name, await self.kube.get(PODS, pod_name, self.namespace))

    async def kubelet_stops(self, name: str = "ws1") -> Obj | None:
        """Play the kubelet: once the Workspace's pod is marked for deletion its containers
        stop and the pod goes (a scheduled pod keeps its termination grace on a cluster; the
        test API server removes pods at once). The pod as it was, or None."""
        pod_name = await self.pod_name(name)
        pod = await self.kube.get_or_none(PODS, pod_name, self.namespace)
        if pod is not None and pod["metadata"].get("deletionTimestamp"):
            await self.kube.delete(
                PODS, pod_name, self.namespace, grace_seconds=0, uid=pod["metadata"]["uid"]
            )
            await self.synced(self.pods, pod_name, None)
        return pod

    async def set_pod_status(self, pod_name: str, status: Obj) -> None:
        pod = await self.kube.patch(
            PODS, pod_name, {"status": status}, self.namespace, sub="status"
        )
        await self.synced(self.pods, pod_name, pod)


@pytest.fixture
async def harness(kube: Kube, namespace: str) -> AsyncIterator[Harness]:
    await ensure_runtime_class(kube, RUNTIME_CLASS)
    await ensure_node(kube, NODE)
    selector = f"{LABEL_APP}={LABEL_APP_VALUE},{LABEL_COMPONENT}={LABEL_COMPONENT_VALUE}"
    workspaces = Informer(kube, WORKSPACES, namespace=namespace)
    pods = Informer(kube, PODS, namespace=namespace, labels=selector)
    pvcs = Informer(kube, PVCS, namespace=namespace)
    namespaces = Informer(kube, NAMESPACES, transform=namespace_view)
    informers = (workspaces, pods, pvcs, namespaces)
    tasks = [asyncio.create_task(i.run()) for i in informers]
    registry = CollectorRegistry()
    clock = FakeClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))
    reconciler = WorkspaceReconciler(
        reconcile_deps(
            kube,
            workspaces,
            pods,
            pvcs,
            verify_metrics=VerifyMetrics(registry),
            namespaces=NamespaceLabels(namespaces),
            clock=clock,
            recovery_metrics=RecoveryMetrics(registry),
            lifecycle=LifecycleMetrics(registry),
        )
    )
    try:
        for informer in informers:
            await asyncio.wait_for(informer.wait_synced(), 10)
        yield Harness(
            kube, namespace, reconciler, workspaces, pods, pvcs, registry, clock, namespaces
        )
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
