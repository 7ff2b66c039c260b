"""The chart's ownership policies installed in an API server, attacked as a tenant would.

Only the controller's ServiceAccount may create an object labelled
``llmsafespaces.dev/workspace-uid``, or add, change or remove that label; nobody else may change
a labelled Secret's data, egress policy's spec or claim's size. Each test installs the
policies rendered with its own namespace as the release namespace, bindings narrowed to it, and
acts as the tenant or the controller by impersonation (runs unchanged on a real cluster as an
admin who may impersonate; the policies are deleted after).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest

from tests.chart.helm import PINS, parse_documents, template
from tests.support.policy_resources import BINDINGS, POLICIES
from wspin.core.contract import LABEL_WORKSPACE_UID
from wspin.core.errors import AlreadyExists, Forbidden
from wspin.core.kinds import PODS, PVCS, SECRETS, SERVICE_ACCOUNTS, Resource
from wspin.core.objects import Obj
from wspin.core.owners import LABEL_QUOTA_MEMBER, LABEL_QUOTA_OWNER, OwnerRecord
from wspin.kube.client import Kube

UID = "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"


def rendered(namespace: str, *, narrowed: bool = True) -> list[tuple[Resource, Obj]]:
    result = template(("minimal.yaml",), PINS, namespace=namespace)
    assert result.returncode == 0, result.stderr
    found: list[tuple[Resource, Obj]] = []
    for doc in parse_documents(result.stdout):
        if "-owned-" not in doc["metadata"]["name"]:
            continue
        if doc["kind"] == "ValidatingAdmissionPolicy":
            found.append((POLICIES, doc))
        elif doc["kind"] == "ValidatingAdmissionPolicyBinding":
            if narrowed:
                doc["spec"]["matchResources"] = {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                }
            found.append((BINDINGS, doc))
    assert len(found) == 8
    return found


ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", kind="Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", kind="RoleBinding")
ACCOUNTS = ("default", "wspin-controller")
"""The tenant's and the controller's ServiceAccounts, as the tests impersonate them."""


async def grant_writes(kube: Kube, namespace: str) -> None:
    """What RBAC lets both accounts do in the namespace, so that what refuses their writes in
    these tests is the policies (a real API server authorizes impersonated requests; the
    accounts exist so that a pod may name one)."""
    for account in ACCOUNTS:
        with contextlib.suppress(AlreadyExists):  # the controller manager's, on a real cluster
            await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": account}}, namespace)
    rules = [
        {"apiGroups": [""], "resources": [plural], "verbs": ["get", "create", "patch"]}
        for plural in ("secrets", "pods", "pods/status", "persistentvolumeclaims")
    ]
    await kube.create(ROLES, {"metadata": {"name": "writer"}, "rules": rules}, namespace)
    binding = {
        "metadata": {"name": "writer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "writer"},
        "subjects": [
            {"kind": "ServiceAccount", "name": account, "namespace": namespace}
            for account in ACCOUNTS
        ],
    }
    await kube.create(ROLE_BINDINGS, binding, namespace)


@pytest.fixture
async def policies(kube: Kube, tenant: Kube, namespace: str) -> AsyncIterator[None]:
    await grant_writes(kube, namespace)
    installed = rendered(namespace)
    for resource, obj in installed:
        await kube.create(resource, obj)
    try:
        await wait_until_enforced(tenant, namespace)
        yield
    finally:
        for resource, obj in reversed(installed):
            await kube.delete(resource, obj["metadata"]["name"])


def secret(name: str, labels: dict[str, str], value: str = "ours") -> Obj:
    return {
        "metadata": {"name": name, "labels": labels},
        "type": "Opaque",
        "data": {"handoff": base64.b64encode(value.encode()).decode()},
    }


async def wait_until_enforced(kube: Kube, namespace: str) -> None:
    """A real API server takes a moment to load new policies (the test server: none)."""
    probe = secret("probe", {LABEL_WORKSPACE_UID: UID})
    for _ in range(600):
        try:
            await kube.create(SECRETS, probe, namespace, dry_run=True)
        except Forbidden as refused:
            # RBAC (the grant not yet in the authorizer's cache) is not the policies.
            if "only the wspin controller may create" in str(refused):
                return
        await asyncio.sleep(0.1)
    pytest.fail("the ownership policies were not enforced within 60 s")


@pytest.fixture
async def tenant(kube_as: Callable[..., Kube], namespace: str) -> Kube:
    return kube_as(f"system:serviceaccount:{namespace}:default", "system:serviceaccounts")


@pytest.fixture
async def controller(kube_as: Callable[..., Kube], namespace: str) -> Kube:
    return kube_as(f"system:serviceaccount:{namespace}:wspin-controller", "system:serviceaccounts")


def pod(name: str, labels: dict[str, str]) -> Obj:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }


@pytest.mark.usefixtures("policies")
@pytest.mark.parametrize(
    ("resource", "body"),
    [
        (SECRETS, secret("workspace-relay-ws1", {LABEL_WORKSPACE_UID: UID})),
        (PODS, pod("ws1-0a1b2c3d", {LABEL_WORKSPACE_UID: UID})),
        (
            PVCS,
            {
                "metadata": {"name": "ws1-workspace", "labels": {LABEL_WORKSPACE_UID: UID}},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        ),
    ],
)
async def test_a_tenant_cannot_plant_an_object_labelled_as_the_controllers(
    tenant: Kube, namespace: str, resource: Resource, body: Obj
) -> None:
    with pytest.raises(Forbidden) as refused:
        await tenant.create(resource, body, namespace)
    assert "only the wspin controller may create" in str(refused.value)


@pytest.mark.usefixtures("policies")
async def test_a_tenant_cannot_label_its_own_object_as_the_controllers(
    kube: Kube, tenant: Kube, namespace: str
) -> None:
    await tenant.create(SECRETS, secret("planted", {}), namespace)
    with pytest.raises(Forbidden) as refused:
        await tenant.patch(
            SECRETS, "planted", {"metadata": {"labels": {LABEL_WORKSPACE_UID: UID}}}, namespace
        )
    assert "cannot be added, changed or removed" in str(refused.value)
    await tenant.create(PODS, pod("planted", {}), namespace)
    with pytest.raises(Forbidden) as refused:  # through the status subresource too
        await tenant.patch(
            PODS,
            "planted",
            {"metadata": {"labels": {LABEL_WORKSPACE_UID: UID}}},
            namespace,
            sub="status",
        )
    assert "cannot be added, changed or removed" in str(refused.value)


@pytest.mark.usefixtures("policies")
async def test_a_cluster_admin_may_label_as_the_controller_does(
    kube: Kube, tenant: Kube, namespace: str
) -> None:
    """The one-off labelling after an upgrade, or a controller run with an admin's config."""
    await tenant.create(SECRETS, secret("old", {}), namespace)
    labelled = await kube.patch(
        SECRETS, "old", {"metadata": {"labels": {LABEL_WORKSPACE_UID: UID}}}, namespace
    )
    assert labelled["metadata"]["labels"][LABEL_WORKSPACE_UID] == UID


@pytest.mark.usefixtures("policies")
async def test_the_controllers_secret_is_its_own_to_change(
    controller: Kube, tenant: Kube, namespace: str
) -> None:
    await controller.create(SECRETS, secret("handoff", {LABEL_WORKSPACE_UID: UID}), namespace)
    forged = {"data": {"handoff": base64.b64encode(b"forged").decode()}}
    with pytest.raises(Forbidden) as refused:
        await tenant.patch(SECRETS, "handoff", forged, namespace)
    assert "nobody else may change it" in str(refused.value)
    with pytest.raises(Forbidden):
        await tenant.patch(
            SECRETS, "handoff", {"metadata": {"labels": {LABEL_WORKSPACE_UID: None}}}, namespace
        )
    # Anything that leaves the label and the data alone passes (garbage collection, labels).
    relabelled = await tenant.patch(
        SECRETS, "handoff", {"metadata": {"labels": {"team": "blue"}}}, namespace
    )
    assert relabelled["metadata"]["labels"][LABEL_WORKSPACE_UID] == UID
    rewritten = await controller.patch(SECRETS, "handoff", forged, namespace)
    assert rewritten["data"] == forged["data"]


@pytest.mark.usefixtures("policies")
async def test_the_quota_labels_of_a_controller_pod_are_the_controllers(
    controller: Kube, tenant: Kube, namespace: str
) -> None:
    """A tenant who could move its pod to another owner's quota (or out of every owner's)
    would spend someone else's limits, or escape its own."""
    vouched = OwnerRecord("user-1", "org-a", vouched=True).quota_labels()
    victim = OwnerRecord("user-2", "org-b", vouched=True).quota_labels()
    await controller.create(
        PODS, pod("ws1-0a1b2c3d", {LABEL_WORKSPACE_UID: UID, **vouched}), namespace
    )
    for change in (victim, {LABEL_QUOTA_OWNER: None}, {LABEL_QUOTA_MEMBER: None}):
        with pytest.raises(Forbidden) as refused:
            await tenant.patch(PODS, "ws1-0a1b2c3d", {"metadata": {"labels": change}}, namespace)
        assert LABEL_QUOTA_OWNER in str(refused.value)
    await controller.create(PODS, pod("ws2-0a1b2c3d", {LABEL_WORKSPACE_UID: UID}), namespace)
    with pytest.raises(Forbidden):
        await tenant.patch(PODS, "ws2-0a1b2c3d", {"metadata": {"labels": victim}}, namespace)


# -- the rendered policies, judged without a server --------------------------------------------


def owned_policies() -> tuple[list[Obj], list[Obj]]:
    docs = [d for _, d in rendered("wspin", narrowed=False)]
    return (
        [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"],
        [d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"],
    )


def test_only_the_controllers_own_service_account_is_exempt() -> None:
    result = template(("minimal.yaml",), PINS)
    docs = parse_documents(result.stdout)
    (account,) = [
        d
        for d in docs
        if d["kind"] == "ServiceAccount"
        and d["metadata"]["labels"].get("app.kubernetes.io/component") == "controller"
    ]
    username = f"system:serviceaccount:wspin:{account['metadata']['name']}"
    policies, _ = owned_policies()
    for policy in policies:
        (condition,) = policy["spec"]["matchConditions"]
        assert condition["expression"] == (
            f"request.userInfo.username != '{username}' && !(has(request.userInfo.groups) && "
            "'system:masters' in request.userInfo.groups)"
        )
        selector = policy["spec"]["matchConstraints"]["objectSelector"]
        assert selector["matchExpressions"][0]["key"] == LABEL_WORKSPACE_UID


def update(resource: str, old: Obj, change: Callable[[Obj], None], user: str) -> Obj:
    import copy

    new = copy.deepcopy(old)
    change(new)
    group = {"networkpolicies": "networking.k8s.io"}.get(resource, "")
    return {
        "operation": "UPDATE",
        "namespace": "team-a",
        "resource": {"group": group, "version": "v1", "resource": resource},
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": new,
        "oldObject": old,
    }


TENANT = "system:serviceaccount:team-a:default"
GC = "system:serviceaccount:kube-system:generic-garbage-collector"
BINDER = "system:serviceaccount:kube-system:persistent-volume-binder"
LABELS = {LABEL_WORKSPACE_UID: UID}
CLAIM: Obj = {
    "metadata": {"name": "ws1-workspace", "labels": LABELS, "ownerReferences": [{"uid": UID}]},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
}
POLICY: Obj = {
    "metadata": {"name": "ws1-egress", "labels": LABELS, "ownerReferences": [{"uid": UID}]},
    "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"ports": [{"port": 53}]}]},
}


def denied(request: Obj) -> str | None:
    from tests.kubeapi.policies import admit

    policies, bindings = owned_policies()
    found = admit(policies, bindings, request)
    return None if found is None else found.message


def grow(claim: Obj) -> None:
    claim["spec"]["resources"]["requests"]["storage"] = "500Gi"


def bind_volume(claim: Obj) -> None:
    claim["spec"]["volumeName"] = "pv-123"
    claim["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}


def open_egress(policy: Obj) -> None:
    policy["spec"]["egress"].append({})


def orphan(obj: Obj) -> None:
    obj["metadata"].pop("ownerReferences")


@pytest.mark.parametrize(
    ("resource", "old", "change", "user", "words"),
    [
        ("persistentvolumeclaims", CLAIM, grow, TENANT, "size"),
        ("networkpolicies", POLICY, open_egress, TENANT, "egress policy"),
        ("persistentvolumeclaims", CLAIM, bind_volume, BINDER, None),
        ("persistentvolumeclaims", CLAIM, orphan, GC, None),
        ("networkpolicies", POLICY, orphan, GC, None),
    ],
)
def test_what_the_cluster_does_passes_and_what_a_tenant_tries_does_not(
    resource: str, old: Obj, change: Callable[[Obj], None], user: str, words: str | None
) -> None:
    message = denied(update(resource, old, change, user))
    if words is None:
        assert message is None
    else:
        assert message is not None and words in message
