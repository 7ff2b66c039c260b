"""Fixtures for the InferenceRelay suites: fake clouds on a hand-moved clock, the fake relay
router over HTTP, a ``Fleet`` harness that drives the reconciler against the Kubernetes API
test server (or a real cluster: CR names are unique, Secrets live in the test namespace), and
the clouds' own APIs the drivers are tested against (moto's EC2, a loopback OCI compute API).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from moto import mock_aws
from moto.ec2.models import amis as moto_amis
from prometheus_client import CollectorRegistry

from controller.relay.deps import RelayDeps
from controller.relay.drivers.base import Driver, vm_tags
from controller.relay.drivers.fake import FakeCloud
from controller.relay.health import RouterHealth
from controller.relay.identity import ClusterIdentity
from controller.relay.metrics import RelayMetrics
from controller.relay.reconciler import InferenceRelayReconciler
from controller.settings import RelayArtifactConfig
from controller.types import Obj, ObjectKey, Requeue
from tests.controller.fakerouter import FakeRouterState, RelayHealthLine, start_fake_router
from tests.controller.relay.moto_ec2 import AMIS, REGION
from tests.controller.relay.oci_credentials import TENANCY
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


# -- the clouds' own APIs: moto's EC2 in process, OCI's compute API on loopback ---------------


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    catalogue = tmp_path / "amis.json"
    catalogue.write_text(json.dumps(AMIS))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("MOTO_AMIS_PATH", str(catalogue))
    monkeypatch.setattr(moto_amis, "AMIS", [dict(ami) for ami in AMIS])
    with mock_aws():
        yield boto3.client("ec2", region_name=REGION)


@pytest.fixture(scope="module")
def pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture
async def compute(pem: str) -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """A compute API on loopback with three instances; records the signed requests."""
    seen: list[dict[str, Any]] = []

    def instance(ocid: str, state: str, tags: dict[str, str]) -> dict[str, Any]:
        return {
            "id": ocid,
            "lifecycleState": state,
            "freeformTags": tags,
            "compartmentId": TENANCY,
            "availabilityDomain": "AD-1",
            "shape": "VM.Standard.A1.Flex",
            "region": "us-ashburn-1",
            "displayName": "relay-oci",
            "timeCreated": "2026-01-01T00:00:00.000Z",
        }

    ours = vm_tags(cluster="c1", owner_uid="u-1", provider="oci")
    instances = {
        "ocid1.instance.ours": instance("ocid1.instance.ours", "RUNNING", ours),
        "ocid1.instance.gone": instance("ocid1.instance.gone", "TERMINATED", ours),
        "ocid1.instance.foreign": instance("ocid1.instance.foreign", "RUNNING", {}),
    }

    async def record(request: web.Request) -> None:
        seen.append({"method": request.method, "path": request.path,
                     "authorization": request.headers.get("authorization", "")})  # fmt: skip

    async def list_instances(request: web.Request) -> web.Response:
        await record(request)
        return web.json_response(list(instances.values()))

    async def get_instance(request: web.Request) -> web.Response:
        await record(request)
        found = instances.get(request.match_info["id"])
        if found is None:
            return web.json_response(
                {"code": "NotAuthorizedOrNotFound", "message": "no"}, status=404
            )
        return web.json_response(found)

    async def terminate(request: web.Request) -> web.Response:
        await record(request)
        if request.match_info["id"] not in instances:
            return web.json_response(
                {"code": "NotAuthorizedOrNotFound", "message": "no"}, status=404
            )
        instances[request.match_info["id"]]["lifecycleState"] = "TERMINATING"
        return web.Response(status=204)

    async def vnic_attachments(request: web.Request) -> web.Response:
        await record(request)
        return web.json_response(
            [{"id": "att", "vnicId": "ocid1.vnic.1", "lifecycleState": "ATTACHED",
              "instanceId": request.query["instanceId"], "compartmentId": TENANCY,
              "availabilityDomain": "AD-1"}]
        )  # fmt: skip

    async def domains(request: web.Request) -> web.Response:
        await record(request)
        return web.json_response([{"name": "Uocm:US-ASHBURN-AD-1", "compartmentId": TENANCY}])

    async def images(request: web.Request) -> web.Response:
        await record(request)
        seen[-1]["query"] = dict(request.query)
        return web.json_response([{"id": "ocid1.image.jammy-arm", "compartmentId": TENANCY}])

    async def launch(request: web.Request) -> web.Response:
        await record(request)
        body = await request.json()
        seen[-1]["body"] = body
        seen[-1]["retry_token"] = request.headers.get("opc-retry-token", "")
        ocid = "ocid1.instance.launched"
        instances[ocid] = instance(ocid, "PROVISIONING", body["freeformTags"])
        return web.json_response(instances[ocid])

    async def get_and_boot(request: web.Request) -> web.Response:
        found = instances.get(request.match_info["id"])
        response = await get_instance(request)
        if found is not None and found["lifecycleState"] == "PROVISIONING":
            found["lifecycleState"] = "RUNNING"  # boots between two polls
        return response

    async def vnic(request: web.Request) -> web.Response:
        await record(request)
        return web.json_response({"id": "ocid1.vnic.1", "publicIp": "192.0.2.10"})

    # The vault API (the VM tokens): secrets by OCID, content as the last version's base64.
    secrets: dict[str, dict[str, Any]] = {}

    async def create_secret(request: web.Request) -> web.Response:
        await record(request)
        body = await request.json()
        seen[-1]["body"] = body
        ocid = f"ocid1.vaultsecret.{len(secrets) + 1}"
        secrets[ocid] = {
            "id": ocid, "compartmentId": body["compartmentId"], "vaultId": body["vaultId"],
            "keyId": body["keyId"], "secretName": body["secretName"], "lifecycleState": "ACTIVE",
            "freeformTags": body.get("freeformTags") or {},
            "content": body["secretContent"]["content"],
        }  # fmt: skip
        return web.json_response(secrets[ocid])

    async def list_secrets(request: web.Request) -> web.Response:
        await record(request)
        query = request.query
        return web.json_response([
            s for s in secrets.values()
            if s["secretName"] == query.get("name", s["secretName"])
            and s["vaultId"] == query.get("vaultId", s["vaultId"])
        ])  # fmt: skip

    async def get_secret(request: web.Request) -> web.Response:
        await record(request)
        found = secrets.get(request.match_info["id"])
        if found is None:
            return web.json_response(
                {"code": "NotAuthorizedOrNotFound", "message": "no"}, status=404
            )
        return web.json_response(found)

    async def update_secret(request: web.Request) -> web.Response:
        await record(request)
        body = await request.json()
        seen[-1]["body"] = body
        secrets[request.match_info["id"]]["content"] = body["secretContent"]["content"]
        return web.json_response(secrets[request.match_info["id"]])

    async def schedule_deletion(request: web.Request) -> web.Response:
        await record(request)
        seen[-1]["body"] = await request.json()
        found = secrets.get(request.match_info["id"])
        if found is None:
            return web.json_response(
                {"code": "NotAuthorizedOrNotFound", "message": "no"}, status=404
            )
        found["lifecycleState"] = "PENDING_DELETION"
        return web.Response(status=200)

    app = web.Application()
    app.router.add_get("/20160918/instances", list_instances)
    app.router.add_get("/20160918/instances/", list_instances)
    app.router.add_get("/20160918/instances/{id}", get_and_boot)
    app.router.add_get("/20160918/availabilityDomains", domains)
    app.router.add_get("/20160918/availabilityDomains/", domains)
    app.router.add_get("/20160918/images", images)
    app.router.add_get("/20160918/images/", images)
    app.router.add_post("/20160918/instances", launch)
    app.router.add_post("/20160918/instances/", launch)
    app.router.add_delete("/20160918/instances/{id}", terminate)
    app.router.add_get("/20160918/vnicAttachments", vnic_attachments)
    app.router.add_get("/20160918/vnicAttachments/", vnic_attachments)
    app.router.add_get("/20160918/vnics/{id}", vnic)
    app.router.add_post("/20180608/secrets", create_secret)
    app.router.add_get("/20180608/secrets", list_secrets)
    app.router.add_get("/20180608/secrets/{id}", get_secret)
    app.router.add_put("/20180608/secrets/{id}", update_secret)
    app.router.add_post("/20180608/secrets/{id}/actions/scheduleDeletion", schedule_deletion)
    runner, url = await serve(app)
    try:
        yield url, seen
    finally:
        await runner.cleanup()
