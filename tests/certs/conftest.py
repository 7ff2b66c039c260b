"""Certificate test helpers: a fixed clock, real handshakes, a live HTTPS webhook.

- ``NOW``: the fixed instant the pure tests build certificates at.
- ``handshake(port, trust_pem)``: the certificate a fresh TLS connection gets, verified by a
  client that trusts only ``trust_pem`` and checks the Service's DNS name.
- ``serve(source)``: the real webhook application (``make_app``) served over HTTPS from a
  certificate source on loopback; yields the port.
- ``admission_review()``: a real captured pod AdmissionReview.
- ``webhooks`` (fixture): a Mutating and a ValidatingWebhookConfiguration on the API server,
  uniquely named (they are cluster scoped), deleted afterwards; ``create_configurations`` and
  ``delete_configurations`` do it again (an uninstall and a re-install).
- ``replica(kube, namespace, webhooks, identity, …)``: a self-managed source as one webhook
  replica runs it, campaigning for the shared Lease with short test timings; ``identity`` is
  also its pod name.
- ``endpoint_slice(kube, namespace, {pod: ready})``: the webhook Service's EndpointSlice.
- ``published_bundle(kube, webhooks)``: the caBundle of every entry of both configurations.
- ``hold_the_lease_for_a_replica_that_is_gone(kube, namespace)``: the certificate Lease as a
  replica leaves it when its release was refused.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import json
import ssl
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry

from certs.authority import Policy
from certs.build import service_dns_names
from certs.cabundle import targets
from certs.metrics import CertificateMetrics
from certs.reports import ENDPOINT_SLICES, SERVICE_NAME_LABEL, ServingReports, reports_name
from certs.selfmanaged import SelfManagedSettings, SelfManagedSource
from certs.source import CertificateSource
from certs.store import SecretStore
from tests.fixtures import ADMISSION
from webhook.app import make_app
from webhook.demo import DEMO_CONFIG
from webhook.inject import InjectConfig
from webhook.validate import ValidatorConfig
from wspin.core.clock import Clock, utc_now
from wspin.core.kinds import LEASES, MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS
from wspin.core.objects import Obj
from wspin.http.probes import Readiness
from wspin.http.server import serve as serve_http
from wspin.kube.client import Kube
from wspin.kube.leader import LeaderElector, LeaseSettings

NOW = datetime.datetime(2026, 3, 1, 12, 0, 0, tzinfo=datetime.UTC)
SERVICE = "wspin-webhook"
NAMESPACE = "wspin-system"
SERVICE_HOST = f"{SERVICE}.{NAMESPACE}.svc"
CAPTURES = ADMISSION


def trust(bundle_pem: bytes) -> ssl.SSLContext:
    """A client context trusting exactly ``bundle_pem``, as the API server does a caBundle."""
    return ssl.create_default_context(cadata=bundle_pem.decode())


async def handshake(
    port: int, trust_pem: bytes, server_hostname: str = SERVICE_HOST
) -> x509.Certificate:
    """Open a new verified TLS connection to 127.0.0.1:port; return the served certificate."""
    _, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=trust(trust_pem), server_hostname=server_hostname
    )
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()


def inject_config() -> InjectConfig:
    """The configuration the captured manifests were made with (README of the captures)."""
    return DEMO_CONFIG


def admission_review() -> dict[str, Any]:
    review: dict[str, Any] = json.loads((CAPTURES / "pod-create-workspace.json").read_text())
    return review


@contextlib.asynccontextmanager
async def serve(source: CertificateSource) -> AsyncIterator[int]:
    """The webhook app over HTTPS on loopback, its TLS from ``source``; yields the port."""
    app = make_app(inject_config(), ValidatorConfig(), Readiness())
    runner = await serve_http(app, "127.0.0.1", 0, ssl_context=source.ssl_context())
    try:
        yield runner.port
    finally:
        await runner.shutdown()


@dataclass(frozen=True)
class Webhooks:
    mutating: str
    validating: str


def _configuration(name: str, entries: int) -> Obj:
    return {
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"e{i}.llmsafespaces.dev",
                "clientConfig": {
                    "service": {"name": SERVICE, "namespace": NAMESPACE, "path": "/mutate-pods"}
                },
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
            }
            for i in range(entries)
        ],
    }


async def create_configurations(kube: Kube, names: Webhooks) -> None:
    """Both configurations as the chart renders them: two mutating entries and one
    validating, none with a caBundle."""
    await kube.create(MUTATING_WEBHOOKS, _configuration(names.mutating, 2))
    await kube.create(VALIDATING_WEBHOOKS, _configuration(names.validating, 1))


async def delete_configurations(kube: Kube, names: Webhooks) -> None:
    await kube.delete(MUTATING_WEBHOOKS, names.mutating)
    await kube.delete(VALIDATING_WEBHOOKS, names.validating)


@pytest.fixture
async def webhooks(kube: Kube) -> AsyncIterator[Webhooks]:
    suffix = uuid.uuid4().hex[:8]
    names = Webhooks(f"wspin-test-{suffix}", f"wspin-test-{suffix}-workspaces")
    await create_configurations(kube, names)
    yield names
    await delete_configurations(kube, names)


SECRET = "wspin-webhook-tls"
TEST_POLICY = Policy(dns_names=tuple(service_dns_names(SERVICE, NAMESPACE)))


def replica(
    kube: Kube,
    namespace: str,
    webhooks: Webhooks,
    identity: str,
    *,
    policy: Policy = TEST_POLICY,
    clock: Clock = utc_now,
    refresh: float = 0.05,
    metrics: CertificateMetrics | None = None,
) -> SelfManagedSource:
    """One webhook replica's self-managed source, as ``certs.source.certificate_source``
    builds it but with timings short enough for tests (``metrics``: on a registry of its own
    unless given)."""
    settings = SelfManagedSettings(
        secret=SECRET,
        namespace=namespace,
        policy=policy,
        webhooks=tuple(targets(webhooks.mutating, webhooks.validating)),
        refresh=refresh,
        pod=identity,
    )
    elector = LeaderElector(
        kube,
        LeaseSettings(
            namespace=namespace,
            name=f"{SECRET}-authority",
            identity=identity,
            lease_duration=2.0,
            renew_deadline=1.5,
            retry_period=0.1,
        ),
    )
    reports = ServingReports(kube, namespace, reports_name(SECRET), SERVICE)
    return SelfManagedSource(
        SecretStore(kube, namespace, SECRET),
        settings,
        elector,
        reports=reports,
        metrics=metrics or CertificateMetrics(CollectorRegistry()),
        clock=clock,
    )


async def endpoint_slice(kube: Kube, namespace: str, pods: dict[str, bool]) -> None:
    """The webhook Service's EndpointSlice listing ``pods`` (name → ready), as the
    EndpointSlice controller writes it; created, or replaced when it exists."""
    name = f"{SERVICE}-replicas"
    body: Obj = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                SERVICE_NAME_LABEL: SERVICE,
                # Not the EndpointSlice controller's own label, so a real cluster leaves it be.
                "endpointslice.kubernetes.io/managed-by": "wspin-tests",
            },
        },
        "addressType": "IPv4",
        "endpoints": [
            {
                "addresses": [f"10.0.0.{i + 1}"],
                "conditions": {"ready": ready, "serving": ready, "terminating": False},
                "targetRef": {"kind": "Pod", "name": pod, "namespace": namespace},
            }
            for i, (pod, ready) in enumerate(pods.items())
        ],
        "ports": [{"name": "https", "port": 8443, "protocol": "TCP"}],
    }
    existing = await kube.get_or_none(ENDPOINT_SLICES, name, namespace)
    if existing is None:
        await kube.create(ENDPOINT_SLICES, body, namespace)
    else:
        body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        await kube.replace(ENDPOINT_SLICES, body)


async def published_bundle(kube: Kube, webhooks: Webhooks) -> list[bytes]:
    """What the API server would trust for each webhook entry of both configurations."""
    found = []
    for resource, name in (
        (MUTATING_WEBHOOKS, webhooks.mutating),
        (VALIDATING_WEBHOOKS, webhooks.validating),
    ):
        config = await kube.get(resource, name)
        for entry in config["webhooks"]:
            found.append(base64.b64decode(entry["clientConfig"].get("caBundle", "")))
    return found


async def hold_the_lease_for_a_replica_that_is_gone(kube: Kube, namespace: str) -> None:
    """The Lease as a replica leaves it when its release fails (an uninstall deletes the
    RBAC that allows it at the same moment as the replica): held, freshly renewed, and for
    an hour, so only a successor that does not wait for it gets anywhere in this test."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    spec = {
        "holderIdentity": "wspin-webhook-6d9f-gone_0badcafe",
        "leaseDurationSeconds": 3600,
        "acquireTime": now,
        "renewTime": now,
    }
    name = f"{SECRET}-authority"
    lease = await kube.get_or_none(LEASES, name, namespace)
    if lease is None:
        await kube.create(
            LEASES, {"metadata": {"name": name, "namespace": namespace}, "spec": spec}
        )
    else:
        lease["spec"] = spec
        await kube.replace(LEASES, lease)
