"""A whole installation for ``wspin check`` and ``wspin status`` tests.

On the test API server: the chart rendered by the real helm and applied (RBAC, Services,
Deployments, both webhook configurations), the real webhook app serving over real TLS with a
certificate from a throwaway CA in the chart's Secret, its CA patched into both
configurations by the real caBundle patcher, the Service routed to it, the Deployments'
status written as the deployment controller would, and the controller's leader Lease held.

On the control plane the session starts (``tests.support.apiserver``): the same installation
in a fresh release namespace per test, so every cluster-scoped name (both webhook
configurations, the ClusterRoles and their bindings) is the test's own and is deleted at
teardown. The API server reaches the in-process webhook through the release's Service made an
``ExternalName`` for 127.0.0.1, each configuration entry's ``service.port`` naming the loopback
port (the entry still calls the release's Service, as ``wspin check`` requires, and the API
server still verifies the certificate for ``NAME.NS.svc`` against the caBundle). Every entry
also selects only namespaces labelled ``ROUTE_LABEL=<release namespace>`` (the probe namespace,
and those a test passes to ``Installed.admit``), so no other test's pods are ever sent to it.
The deployment controller is not run there (``tests.support.apiserver``): the status
``mark_ready`` writes stays.

On a real cluster (``WSPIN_TEST_KUBECONFIG``): the installation already there, named by
``WSPIN_TEST_RELEASE`` (default wspin) in ``WSPIN_TEST_RELEASE_NAMESPACE`` (default wspin),
with the dry-run probe namespace ``WSPIN_TEST_PROBE_NAMESPACE`` (default ``default``).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime
import functools
import os
import ssl
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from certs.build import KeyPair, issue_serving, new_ca, service_dns_names
from certs.cabundle import patch_ca_bundle, targets
from tests.chart.helm import Manifest, render
from tests.kubeapi import KubeServer
from webhook.app import make_app
from webhook.demo import DEMO_CONFIG
from webhook.inject import InjectConfig
from webhook.validate import ValidatorConfig
from wspin.core.contract import AGENTD, LABEL_WORKSPACE
from wspin.core.delivery import PinSet, ResolvedArtifact
from wspin.core.errors import NotFound
from wspin.core.kinds import (
    DEPLOYMENTS,
    LEASES,
    MUTATING_WEBHOOKS,
    NAMESPACES,
    SECRETS,
    VALIDATING_WEBHOOKS,
    Resource,
)
from wspin.http.probes import Readiness
from wspin.http.server import serve
from wspin.kube.client import Kube
from wspinctl.check import check_pod
from wspinctl.install import LEADER_LEASE, Installation

RELEASE_NAMESPACE = "wspin"
PROBE_NAMESPACE = "default"
ROUTE_LABEL = "wspin-test/webhook"
"""On the session's control plane: the release namespace whose webhook a namespace opts into."""
LOOPBACK = "127.0.0.1"

Route = Callable[[int], Awaitable[None]]
"""Sends the API server's calls to the release's webhook Service to a loopback port."""

#: The release the tests install: the demo's images and pins, so the webhook needs no registry.
RELEASE_VALUES: dict[str, Any] = {
    f"{name}Delivery.{key}": value
    for name, artifact in (("agentd", DEMO_CONFIG.agentd), ("opencode", DEMO_CONFIG.opencode))
    for key, value in (
        ("image", artifact.image),
        ("binarySHA256Amd64", artifact.pins.amd64),
        ("binarySHA256Arm64", artifact.pins.arm64),
    )
}

_SERVED_BY_THE_FAKE = {
    ("v1", "ServiceAccount"): Resource("", "v1", "serviceaccounts", kind="ServiceAccount"),
    ("v1", "Service"): Resource("", "v1", "services", kind="Service"),
    ("v1", "ConfigMap"): Resource("", "v1", "configmaps", kind="ConfigMap"),
    ("apps/v1", "Deployment"): DEPLOYMENTS,
    **{
        ("rbac.authorization.k8s.io/v1", kind): Resource(
            "rbac.authorization.k8s.io",
            "v1",
            plural,
            namespaced=kind in ("Role", "RoleBinding"),
            kind=kind,
        )
        for kind, plural in (
            ("Role", "roles"),
            ("RoleBinding", "rolebindings"),
            ("ClusterRole", "clusterroles"),
            ("ClusterRoleBinding", "clusterrolebindings"),
        )
    },
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"): Resource(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        namespaced=False,
        kind="MutatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"): Resource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        namespaced=False,
        kind="ValidatingWebhookConfiguration",
    ),
}

NAMES = [
    "crds",
    "mutating-webhook",
    "validating-webhook",
    "ca-bundle",
    "webhook-ready",
    "image-volumes",
    "controller-leader",
    "dry-run-injection",
    "rbac-webhook",
    "rbac-controller",
]
"""What ``wspin check`` runs, in the order it reports them."""


@dataclass
class Installed:
    """What a test gets: the installation's names and where the dry-run pod goes."""

    install: Installation
    probe_namespace: str
    route: Route | None = None
    """How the API server's webhook calls reach a loopback port (None on a real cluster)."""
    ca: KeyPair | None = None
    """The CA the webhook's certificate comes from (None on a real cluster)."""
    folder: Path | None = None
    port: int = 0
    """The loopback port of the installation's own webhook (0 on a real cluster)."""

    @asynccontextmanager
    async def serving(self, folder: Path, config: InjectConfig) -> AsyncIterator[None]:
        """Another release of the webhook (same CA) takes the calls, then the installation's
        own again: how a test rolls a release out."""
        assert self.route is not None, "a real cluster's installation is not the test's"
        try:
            async with webhook_serving(self.route, folder, self.install, config, self.ca):
                yield
        finally:
            await self.route(self.port)

    async def admit(self, kube: Kube, namespace: str) -> None:
        """Opt ``namespace`` in to this installation's webhook (on the session's control
        plane its configurations select only such namespaces; elsewhere a no-op label)."""
        labels = {"metadata": {"labels": {ROUTE_LABEL: self.install.namespace}}}
        await kube.patch(NAMESPACES, namespace, labels)


@functools.cache
def chart_documents(namespace: str = RELEASE_NAMESPACE) -> tuple[Manifest, ...]:
    """The chart as helm renders it for the test release in ``namespace``."""
    return tuple(render(("minimal.yaml",), RELEASE_VALUES, namespace=namespace))


def installed_on_real_cluster() -> Installed:
    return Installed(
        Installation(
            os.environ.get("WSPIN_TEST_RELEASE_NAMESPACE", RELEASE_NAMESPACE),
            os.environ.get("WSPIN_TEST_RELEASE", "wspin"),
        ),
        os.environ.get("WSPIN_TEST_PROBE_NAMESPACE", PROBE_NAMESPACE),
    )


@asynccontextmanager
async def webhook_serving(
    route: Route,
    folder: Path,
    install: Installation,
    config: InjectConfig,
    ca: KeyPair | None = None,
) -> AsyncIterator[tuple[KeyPair, bytes, int]]:
    """The real webhook app on loopback behind the Service, with a certificate for the
    Service's DNS names from ``ca`` (a fresh CA by default); yields (CA, serving PEM, port)."""
    now = datetime.datetime.now(datetime.UTC)
    ca = ca or new_ca(now)
    serving = issue_serving(ca, service_dns_names(install.webhook, install.namespace), now)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tls.crt").write_bytes(serving.cert_pem)
    (folder / "tls.key").write_bytes(serving.key_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(folder / "tls.crt", folder / "tls.key")
    runner = await serve(
        make_app(config, ValidatorConfig(), Readiness()), "127.0.0.1", 0, ssl_context=context
    )
    try:
        await route(runner.port)
        yield ca, serving.cert_pem, runner.port
    finally:
        await runner.shutdown()


def fake_route(server: KubeServer, install: Installation) -> Route:
    """The test API server sends the Service's calls wherever it is told."""

    async def route(port: int) -> None:
        server.route_service(install.namespace, install.webhook, port)

    return route


def loopback_route(kube: Kube, install: Installation) -> Route:
    """A real API server calls the ExternalName Service's host (loopback) on the port each
    configuration entry names."""

    async def route(port: int) -> None:
        for res, name in (
            (MUTATING_WEBHOOKS, install.mutating_webhook),
            (VALIDATING_WEBHOOKS, install.validating_webhook),
        ):
            config = await kube.get(res, name)
            for webhook in config["webhooks"]:
                webhook["clientConfig"]["service"]["port"] = port
            await kube.replace(res, config)

    return route


def on_loopback(doc: Manifest, install: Installation) -> Manifest:
    """A rendered object as the session's control plane gets it: the webhook's Service an
    ExternalName for loopback, each webhook entry limited to the namespaces opted in."""
    doc = copy.deepcopy(doc)
    if doc["kind"] == "Service" and doc["metadata"]["name"] == install.webhook:
        ports = [
            {k: p[k] for k in ("name", "port", "protocol") if k in p} for p in doc["spec"]["ports"]
        ]
        doc["spec"] = {"type": "ExternalName", "externalName": LOOPBACK, "ports": ports}
    elif doc["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for webhook in doc["webhooks"]:
            selector = webhook.setdefault("namespaceSelector", {})
            selector.setdefault("matchLabels", {})[ROUTE_LABEL] = install.namespace
    return doc


async def apply_chart(
    kube: Kube,
    install: Installation,
    *,
    loopback: bool = False,
    created: list[tuple[Resource, str]] | None = None,
) -> None:
    """Create every rendered object the test API server serves (CRDs are already there),
    adding each cluster-scoped one to ``created`` as soon as it exists."""
    await kube.create(NAMESPACES, {"metadata": {"name": install.namespace}})
    for doc in chart_documents(install.namespace):
        res = _SERVED_BY_THE_FAKE.get((doc["apiVersion"], doc["kind"]))
        if res is None or (doc.get("metadata", {}).get("annotations") or {}).get("helm.sh/hook"):
            continue  # not served by the fake (PDB, NetworkPolicy, policies), or a test hook
        if loopback:
            doc = on_loopback(doc, install)
        body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
        await kube.create(res, body, install.namespace if res.namespaced else None)
        if not res.namespaced and created is not None:
            created.append((res, doc["metadata"]["name"]))


async def mark_ready(
    kube: Kube, install: Installation, name: str, ready: int | None = None
) -> None:
    """Write a Deployment's status as the deployment controller does once pods are ready."""
    deployment = await kube.get(DEPLOYMENTS, name, install.namespace)
    wanted = int(deployment["spec"].get("replicas", 1))
    count = wanted if ready is None else ready
    status = {
        "observedGeneration": deployment["metadata"].get("generation", 1),
        "replicas": wanted,
        "updatedReplicas": wanted,
        "readyReplicas": count,
        "availableReplicas": count,
    }
    await kube.patch(DEPLOYMENTS, name, {"status": status}, install.namespace, sub="status")


def micro_time(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def hold_leader_lease(kube: Kube, install: Installation, *, renewed_ago: float = 1) -> None:
    """The Lease as a leading controller replica keeps it."""
    renewed = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=renewed_ago)
    spec = {
        "holderIdentity": "wspin-controller-7d9f_1a2b3c4d",
        "leaseDurationSeconds": 15,
        "acquireTime": micro_time(renewed),
        "renewTime": micro_time(renewed),
    }
    try:
        lease = await kube.get(LEASES, LEADER_LEASE, install.namespace)
    except NotFound:
        await kube.create(
            LEASES, {"metadata": {"name": LEADER_LEASE}, "spec": spec}, install.namespace
        )
        return
    lease["spec"] = spec
    await kube.replace(LEASES, lease)


@asynccontextmanager
async def installed_on_test_server(
    server: KubeServer, kube: Kube, folder: Path
) -> AsyncIterator[Installed]:
    install = Installation(RELEASE_NAMESPACE, "wspin")
    await apply_chart(kube, install)
    route = fake_route(server, install)
    async with _completed(kube, install, route, PROBE_NAMESPACE, folder) as found:
        yield found


@asynccontextmanager
async def installed_on_control_plane(kube: Kube, folder: Path) -> AsyncIterator[Installed]:
    """The installation on the session's own control plane, every name the test's own."""
    install = Installation(f"wspin-{uuid.uuid4().hex[:8]}", "wspin")
    probe = f"{install.namespace}-probe"
    namespaces = [install.namespace]
    cluster_scoped: list[tuple[Resource, str]] = []
    try:
        await apply_chart(kube, install, loopback=True, created=cluster_scoped)
        await kube.create(
            NAMESPACES,
            {"metadata": {"name": probe, "labels": {ROUTE_LABEL: install.namespace}}},
        )
        namespaces.append(probe)
        route = loopback_route(kube, install)
        async with _completed(kube, install, route, probe, folder) as found:
            try:
                yield found
            finally:
                # Before the webhook stops: no call may find it gone.
                await _delete(kube, cluster_scoped)
    finally:
        await _delete(kube, cluster_scoped)
        await _delete(kube, [(NAMESPACES, name) for name in namespaces])


async def _delete(kube: Kube, objects: list[tuple[Resource, str]]) -> None:
    for res, name in objects:
        with contextlib.suppress(NotFound):
            await kube.delete(res, name)


@asynccontextmanager
async def _completed(
    kube: Kube, install: Installation, route: Route, probe_namespace: str, folder: Path
) -> AsyncIterator[Installed]:
    """The applied chart made whole: its webhook serving, certificates, ready Deployments,
    the leader Lease."""
    serving = webhook_serving(route, folder, install, DEMO_CONFIG)
    async with serving as (ca, serving_pem, port):
        ca_pem = ca.cert_pem
        secret = {
            "metadata": {"name": f"{install.webhook}-tls"},
            "data": {
                "ca.crt": base64.b64encode(ca_pem).decode(),
                "tls.crt": base64.b64encode(serving_pem).decode(),
            },
        }
        await kube.create(SECRETS, secret, install.namespace)
        await patch_ca_bundle(
            kube, ca_pem, targets(install.mutating_webhook, install.validating_webhook)
        )
        for name in (install.webhook, install.controller):
            await mark_ready(kube, install, name)
        await hold_leader_lease(kube, install)
        yield Installed(install, probe_namespace, route, ca, folder, port)


# -- workspace pods of two releases, for wspin status --------------------------------------

OLD_AGENTD = "ghcr.io/example/agentd@sha256:" + "1" * 64
OLD_RELEASE = InjectConfig(
    agentd=ResolvedArtifact(AGENTD, OLD_AGENTD, PinSet("e" * 64, "f" * 64), source="demo"),
    opencode=DEMO_CONFIG.opencode,
)


def workspace_pod(namespace: str, name: str, workspace: str) -> dict[str, Any]:
    pod = check_pod(namespace)
    pod["metadata"].pop("generateName")
    pod["metadata"]["name"] = name
    pod["metadata"]["labels"][LABEL_WORKSPACE] = workspace
    return pod
