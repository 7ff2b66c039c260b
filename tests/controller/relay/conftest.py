"""Fixtures for the InferenceRelay suites: fake clouds on a hand-moved clock, the fake relay
router over HTTP, and a ``Fleet`` harness that drives the reconciler against the Kubernetes
API test server (or a real cluster: CR names are unique, Secrets live in the test namespace).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from controller.relay.deps import RelayDeps
from controller.relay.drivers.base import Driver
from controller.relay.drivers.fake import FakeCloud
from controller.relay.health import RouterHealth
from controller.relay.identity import ClusterIdentity
from controller.relay.metrics import RelayMetrics
from controller.relay.reconciler import InferenceRelayReconciler
from controller.settings import RelayArtifactConfig
from controller.types import Obj, ObjectKey, Requeue
from tests.controller.fakerouter import FakeRouterState, RelayHealthLine, start_fake_router
from tests.support.clock import FakeClock
from wspin.core.kinds import INFERENCE_RELAYS
from wspin.kube.client import Kube

SHA_ARM64 = "a" * 64
SHA_AMD64 = "b" * 64
ARTIFACTS = RelayArtifactConfig(
    urls=("https://mirror-one.example/relay", "https://mirror-two.example/relay"),
    sha256_arm64=SHA_ARM64,
    sha256_amd64=SHA_AMD64,
)
AWS_SLOT = {"provider": "aws", "region": "us-east-1", "credentialsRef": {"name": "aws-relay-irwa"}}
CLUSTER = "cluster-a"
OCI_SLOT = {
    "provider": "oci",
    "region": "us-ashburn-1",
    "credentialsRef": {"name": "oci-credentials"},
}


class SnapshotReader:
    """An ``ObjectReader`` the test refreshes from the API before each pass (deterministic,
    unlike a watch-fed cache whose timing a test cannot control)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.objects: dict[ObjectKey, Obj] = {}

    async def refresh(self) -> None:
        listing = await self.kube.list(INFERENCE_RELAYS)
        self.objects = {ObjectKey.of(obj): obj for obj in listing.get("items", [])}

    def get(self, key: ObjectKey) -> Obj | None:
        return self.objects.get(key)

    def list(self, namespace: str | None = None, labels: dict[str, str] | None = None) -> list[Obj]:
        return list(self.objects.values())


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def fake_cloud(clock: FakeClock, provider: str, **knobs: Any) -> FakeCloud:
    prefix = "i-" if provider == "aws" else f"ocid1.instance.{provider}."
    return FakeCloud(provider=provider, clock=clock, id_prefix=prefix, **knobs)


@pytest.fixture
def aws(clock: FakeClock) -> FakeCloud:
    return fake_cloud(clock, "aws")


@pytest.fixture
def oci(clock: FakeClock) -> FakeCloud:
    return fake_cloud(clock, "oci")


@pytest.fixture
def metrics() -> RelayMetrics:
    return RelayMetrics(CollectorRegistry())


@pytest.fixture
async def router() -> AsyncIterator[tuple[FakeRouterState, str]]:
    state = FakeRouterState()
    runner, url = await start_fake_router(state)
    try:
        yield state, url
    finally:
        await runner.cleanup()


@dataclass
class Fleet:
    """The reconciler wired to fake clouds, the fake router and the API; one CR per test."""

    kube: Kube
    namespace: str
    clock: FakeClock
    clouds: dict[str, FakeCloud]
    router: FakeRouterState
    deps: RelayDeps
    reconciler: InferenceRelayReconciler
    reader: SnapshotReader
    name: str = field(default_factory=lambda: f"fleet-{uuid.uuid4().hex[:8]}")

    async def create(self, *slots: dict[str, Any], **spec: Any) -> Obj:
        body = {
            "metadata": {"name": self.name},
            "spec": {"upstreamURL": "https://upstream.example/v1", "providers": list(slots)} | spec,
        }
        return await self.kube.create(INFERENCE_RELAYS, body)

    async def reconcile(self) -> Requeue | None:
        await self.reader.refresh()
        return await self.reconciler.reconcile(ObjectKey("", self.name))

    async def get(self) -> Obj:
        return await self.kube.get(INFERENCE_RELAYS, self.name)

    async def instances(self) -> list[dict[str, Any]]:
        return list(((await self.get()).get("status") or {}).get("instances") or [])

    async def condition(self, type_: str) -> dict[str, Any]:
        for condition in ((await self.get()).get("status") or {}).get("conditions") or []:
            if condition["type"] == type_:
                return dict(condition)
        raise AssertionError(f"no {type_} condition")

    def report(self, instance_id: str, healthy: bool = True, **traffic: Any) -> None:
        """Make the fake router report ``instance_id`` on its next scrape."""
        self.router.relays[instance_id] = RelayHealthLine(healthy=healthy, **traffic)

    async def uid(self) -> str:
        return str((await self.get())["metadata"]["uid"])


def build_fleet(
    kube: Kube,
    namespace: str,
    clock: FakeClock,
    clouds: dict[str, FakeCloud],
    router: tuple[FakeRouterState, str],
    metrics: RelayMetrics,
    **deps_knobs: Any,
) -> Fleet:
    drivers: dict[str, Driver] = dict(clouds)
    deps = RelayDeps(
        kube=kube,
        namespace=namespace,
        drivers=drivers,
        artifacts=deps_knobs.pop("artifacts", ARTIFACTS),
        metrics=metrics,
        health=RouterHealth(router[1]),
        clock=clock,
        cluster=deps_knobs.pop("cluster", ClusterIdentity(None, CLUSTER)),
        **deps_knobs,
    )
    reader = SnapshotReader(kube)
    return Fleet(
        kube=kube,
        namespace=namespace,
        clock=clock,
        clouds=clouds,
        router=router[0],
        deps=deps,
        reconciler=InferenceRelayReconciler(deps, reader),
        reader=reader,
    )


@pytest.fixture
async def fleet(
    kube: Kube,
    namespace: str,
    clock: FakeClock,
    aws: FakeCloud,
    oci: FakeCloud,
    router: tuple[FakeRouterState, str],
    metrics: RelayMetrics,
) -> AsyncIterator[Fleet]:
    harness = build_fleet(kube, namespace, clock, {"aws": aws, "oci": oci}, router, metrics)
    try:
        yield harness
    finally:
        await _force_delete(kube, harness.name)


async def _force_delete(kube: Kube, name: str) -> None:
    """Drop the test's CR even with its finalizer (matters on a real cluster only)."""
    if await kube.get_or_none(INFERENCE_RELAYS, name) is None:
        return
    await kube.patch(INFERENCE_RELAYS, name, {"metadata": {"finalizers": None}})
    await kube.delete(INFERENCE_RELAYS, name)


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    """Serve ``app`` on a free loopback port; returns the runner and base URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    return runner, f"http://{host}:{port}"
