"""Workspace owners through an API server, with the chart's Workspace webhooks installed.

The real webhook app serves over TLS on loopback; the chart's owner-record (mutating) and
Workspace validator entries are registered with a ``url`` to it and narrowed to this test's
namespaces; writers act by impersonation (``kube_as``), so the API server itself tells the
webhook who wrote. Runs unchanged on the test API server and on a real one.

- The platform API's service account creates Workspaces for its users, with an orgID, in a
  shared namespace with no org label: admitted, the owner recorded as vouched.
- A tenant's write in a namespace only trusted writers may write is denied, saying so.
- A tenant who names someone else's userID is denied; one who names itself is recorded.
- A tenant cannot change spec.owner later, nor the record, even with a metadata-only patch.
- The chart's tenant-quota entry counts the controller's pods of vouched owners per owner in
  the shared namespace, and a review forged straight to the webhook's port changes nothing.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import ssl
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import aiohttp
import pytest

from certs.build import issue_serving, new_ca
from certs.tls import context_for
from tests.chart.helm import PINS, parse_documents, template
from tests.controller.workspace.factories import publish_runtime
from webhook.app import make_app
from webhook.demo import DEMO_CONFIG
from webhook.tenant_quota import QuotaLimits
from webhook.validate import ValidatorConfig
from webhook.watches import watched_views
from wspin.core.contract import LABEL_WORKSPACE_UID
from wspin.core.errors import Forbidden, NotFound
from wspin.core.kinds import (
    MUTATING_WEBHOOKS,
    NAMESPACES,
    PODS,
    VALIDATING_WEBHOOKS,
    WORKSPACES,
    Resource,
)
from wspin.core.objects import Obj
from wspin.core.owners import (
    ANNOTATION_VERIFIED_OWNER,
    OwnerRecord,
    record_of,
    trusted_writers_from,
)
from wspin.core.tenancy import LABEL_WORKSPACE_WRITERS
from wspin.http.probes import Readiness
from wspin.http.server import serve
from wspin.kube.client import Kube

CLUSTER_ROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", namespaced=False, kind="ClusterRole"
)
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", kind="RoleBinding")
API_USER = "system:serviceaccount:llmsafespaces:llmsafespaces-api"
TENANT = "mallory"


def chart_webhooks(namespaces: list[str], url: str, ca: bytes) -> list[tuple[Resource, Obj]]:
    """The chart's Workspace owner-record and validator entries, calling ``url``, narrowed
    to ``namespaces`` and named for this test."""
    sets = {**PINS, "webhook.tenantQuota.maxWorkspacesPerTenant": 1}
    result = template(("minimal.yaml",), sets, namespace="wspin")
    assert result.returncode == 0, result.stderr
    suffix = uuid.uuid4().hex[:8]
    wanted = {
        "MutatingWebhookConfiguration": (MUTATING_WEBHOOKS, ("workspace-owners.",)),
        "ValidatingWebhookConfiguration": (VALIDATING_WEBHOOKS, ("workspaces.", "tenant-quota.")),
    }
    found: list[tuple[Resource, Obj]] = []
    for doc in parse_documents(result.stdout):
        if doc["kind"] not in wanted:
            continue
        resource, prefixes = wanted[doc["kind"]]
        hooks = [h for h in doc["webhooks"] if h["name"].startswith(prefixes)]
        assert len(hooks) == len(prefixes), doc["kind"]
        for hook in hooks:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {
                "url": url + path,
                "caBundle": base64.b64encode(ca).decode(),
            }
            hook["namespaceSelector"] = {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}
                ]
            }
        doc["webhooks"] = hooks
        doc["metadata"] = {"name": f"wspin-test-owners-{suffix}"}
        found.append((resource, doc))
    assert len(found) == 2
    return found


@dataclass
class World:
    kube: Kube
    api: Kube
    tenant: Kube
    shared: str
    """No org label: where the platform's API puts every user's Workspaces."""
    managed: str
    """Labelled workspace-writers=trusted."""
    own: str
    """The tenant's own namespace."""
    port: int
    """The webhook's HTTPS port on loopback (``localhost``, as its certificate names it)."""
    ca: bytes


def workspace(name: str, user: str = "", org: str = "") -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {
            "runtime": "python",
            "storage": {"size": "1Gi"},
            "owner": {"userID": user, "orgID": org},
        },
    }


async def _namespace(kube: Kube, labels: dict[str, str]) -> str:
    name = f"wspin-test-{uuid.uuid4().hex[:10]}"
    await kube.create(
        NAMESPACES, {"metadata": {"name": name, "labels": {"wspin-test": "1", **labels}}}
    )
    return name


async def _admitting(kube: Kube, namespace: str) -> None:
    """A real API server takes a moment to call newly registered webhooks."""
    for _ in range(300):
        try:
            await kube.create(
                WORKSPACES, workspace("probe", "someone-else"), namespace, dry_run=True
            )
        except Forbidden:
            return
        await asyncio.sleep(0.1)
    pytest.fail("the Workspace webhooks were not called within 30 s")


@pytest.fixture
async def world(
    kube: Kube, kube_as: Callable[..., Kube], real_cluster: bool
) -> AsyncIterator[World]:
    await publish_runtime(kube)
    shared = await _namespace(kube, {})
    managed = await _namespace(kube, {LABEL_WORKSPACE_WRITERS: "trusted"})
    own = await _namespace(kube, {})
    role: Obj = {
        "metadata": {"name": f"wspin-test-workspaces-{uuid.uuid4().hex[:8]}"},
        "rules": [
            {
                "apiGroups": ["llmsafespaces.dev"],
                "resources": ["workspaces"],
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
            }
        ],
    }
    await kube.create(CLUSTER_ROLES, role)
    for ns in (shared, managed, own):
        await kube.create(
            ROLE_BINDINGS,
            {
                "metadata": {"name": "workspace-writers"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": role["metadata"]["name"],
                },
                "subjects": [
                    {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": API_USER},
                    {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": TENANT},
                ],
            },
            ns,
        )
    views = watched_views(kube, QuotaLimits(max_workspaces=1))
    running = asyncio.create_task(views.run())
    # The webhook at https://localhost:PORT, as the API server calls a ``url`` entry.
    now = datetime.datetime.now(datetime.UTC)
    authority = new_ca(now)
    leaf = issue_serving(authority, ["localhost"], now)
    ca = authority.cert_pem
    validator = ValidatorConfig(trusted_writers=trusted_writers_from(API_USER))
    app = make_app(DEMO_CONFIG, validator, Readiness(), views, QuotaLimits(max_workspaces=1))
    server = await serve(app, "127.0.0.1", 0, ssl_context=context_for(leaf.cert_pem, leaf.key_pem))
    installed = chart_webhooks([shared, managed, own], f"https://localhost:{server.port}", ca)
    try:
        for informer in views.informers:
            await informer.wait_synced()
        for resource, obj in installed:
            await kube.create(resource, obj)
        api, tenant = kube_as(API_USER), kube_as(TENANT)
        await _admitting(tenant, own)
        yield World(kube, api, tenant, shared, managed, own, server.port, ca)
    finally:
        for resource, obj in installed:
            with contextlib.suppress(NotFound):
                await kube.delete(resource, obj["metadata"]["name"])
        await server.shutdown()
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await kube.delete(CLUSTER_ROLES, role["metadata"]["name"])
        if real_cluster:
            for ns in (shared, managed, own):
                await kube.delete(NAMESPACES, ns)


async def test_the_platform_api_creates_workspaces_for_its_users_in_a_shared_namespace(
    world: World,
) -> None:
    for user, org in (("user-1", "org-a"), ("user-2", "org-b"), ("user-3", "")):
        created = await world.api.create(WORKSPACES, workspace(user, user, org), world.shared)
        assert record_of(created) == OwnerRecord(user, org, vouched=True)
    # in a namespace only trusted writers may write, too
    created = await world.api.create(WORKSPACES, workspace("w", "user-1", "org-a"), world.managed)
    assert record_of(created) == OwnerRecord("user-1", "org-a", vouched=True)


async def test_a_tenants_write_in_a_trusted_writers_namespace_is_denied(world: World) -> None:
    with pytest.raises(Forbidden, match="only trusted writers"):
        await world.tenant.create(WORKSPACES, workspace("mine", TENANT), world.managed)
    await world.api.create(WORKSPACES, workspace("theirs", "user-1"), world.managed)
    with pytest.raises(Forbidden, match="only trusted writers"):
        await world.tenant.patch(WORKSPACES, "theirs", {"spec": {"suspend": True}}, world.managed)


async def test_a_tenant_who_names_someone_elses_user_id_is_denied(world: World) -> None:
    with pytest.raises(Forbidden, match="is not you"):
        await world.tenant.create(WORKSPACES, workspace("spoof", "victim"), world.own)
    created = await world.tenant.create(WORKSPACES, workspace("mine", TENANT), world.own)
    assert record_of(created) == OwnerRecord(TENANT, "", vouched=False)


async def test_a_tenant_cannot_change_the_owner_or_its_record_later(world: World) -> None:
    await world.tenant.create(WORKSPACES, workspace("mine", TENANT), world.own)
    with pytest.raises(Forbidden, match="cannot change after the Workspace is created"):
        await world.tenant.patch(
            WORKSPACES, "mine", {"spec": {"owner": {"userID": "victim"}}}, world.own
        )
    forged = OwnerRecord("victim", "org-a", vouched=True).encode()
    patched = await world.tenant.patch(
        WORKSPACES,
        "mine",
        {"metadata": {"annotations": {ANNOTATION_VERIFIED_OWNER: forged}}},
        world.own,
    )
    assert record_of(patched) == OwnerRecord(TENANT, "", vouched=False)
    # a trusted writer may give it another owner
    moved = await world.api.patch(
        WORKSPACES, "mine", {"spec": {"owner": {"userID": "user-9"}}}, world.own
    )
    assert record_of(moved) == OwnerRecord("user-9", "", vouched=True)


def controller_pod(name: str, user: str = "", org: str = "") -> Obj:
    """A workspace pod as the controller builds it for a Workspace of a vouched owner."""
    labels = {
        "app": "llmsafespaces",
        "component": "workspace",
        "llmsafespaces.dev/workspace": name,
        LABEL_WORKSPACE_UID: str(uuid.uuid4()),
        **(OwnerRecord(user, org, vouched=True).quota_labels() if user or org else {}),
    }
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "workspace", "image": "registry.k8s.io/pause:3.10"}]},
    }


async def _counted(kube: Kube, namespace: str, org: str) -> None:
    """Until the webhook's pod watch has seen ``org``'s one pod (the quota reads only that
    view): a dry-run create for the same org is denied."""
    for _ in range(300):
        try:
            probe = controller_pod("probe", "user-9", org)
            await kube.create(PODS, probe, namespace, dry_run=True)
        except Forbidden:
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"the quota never counted the pod of {org}")


async def test_the_quota_counts_vouched_owners_apart_in_the_shared_namespace(
    world: World,
) -> None:
    await world.kube.create(PODS, controller_pod("a1", "user-1", "org-a"), world.shared)
    await _counted(world.kube, world.shared, "org-a")
    with pytest.raises(Forbidden, match="already runs 1 workspace pods"):
        await world.kube.create(PODS, controller_pod("a2", "user-2", "org-a"), world.shared)
    await world.kube.create(PODS, controller_pod("b1", "user-3", "org-b"), world.shared)
    # and the namespace's own quota is untouched by them
    await world.kube.create(PODS, controller_pod("n1"), world.shared)


async def test_a_forged_review_does_not_deny_another_tenants_real_pod(world: World) -> None:
    pod = controller_pod("forged")
    pod["metadata"]["namespace"] = world.own
    forged: Obj = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "forged",
            "operation": "CREATE",
            "namespace": world.own,
            "name": "forged",
            "object": pod,
        },
    }
    trust = ssl.create_default_context(cadata=world.ca.decode())
    async with aiohttp.ClientSession() as session:
        url = f"https://localhost:{world.port}/validate-pod-tenant-quota"
        for _ in range(3):
            async with session.post(url, json=forged, ssl=trust) as answer:
                assert (await answer.json())["response"]["allowed"] is True
        huge: Obj = {**forged, "request": {**forged["request"], "namespace": "n" * 2_900_000}}
        for _ in range(40):
            async with session.post(url, json=huge, ssl=trust) as answer:
                assert answer.status in (200, 413)
    created = await world.kube.create(PODS, controller_pod("real"), world.own)
    assert created["metadata"]["name"] == "real"
