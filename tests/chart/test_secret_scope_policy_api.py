"""The chart's Secret-scope policy installed in an API server, with the controller's service
account (by impersonation) writing where it may and where it must not.

Rule: outside its own namespace the controller's service account creates, overwrites and
deletes only the Secrets it owns (``workspace-pw-<ws>`` / ``workspace-relay-<ws>`` carrying the
Workspace's uid label; envelopes carrying its labels and the mint key in the relay
namespace), so a bug in it or its stolen token cannot overwrite or delete another Secret (the
router's private key, another Workspace's envelope, a tenant's own Secret). Runs unchanged on
a real cluster as an admin who may impersonate (the policy, a ClusterRole granting the
account Secret access, and its binding are deleted after).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator, Callable

import pytest

from tests.support.secret_scope import SCOPE, controller_under_policy
from wspin.core.contract import LABEL_WORKSPACE_UID
from wspin.core.errors import Forbidden, NotFound
from wspin.core.kinds import NAMESPACES, SECRETS
from wspin.core.objects import Obj
from wspin.kube.client import Kube

UID_A = "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"
UID_B = "9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0"
MANAGED = {"app.kubernetes.io/managed-by": "wspin-controller"}


def secret(name: str, labels: dict[str, str] | None = None, value: str = "v") -> Obj:
    return {
        "metadata": {"name": name, "labels": dict(labels or {})},
        "data": {"value": base64.b64encode(value.encode()).decode()},
    }


def owned(uid: str) -> dict[str, str]:
    return {LABEL_WORKSPACE_UID: uid}


def envelope_labels(uid: str) -> dict[str, str]:
    return {LABEL_WORKSPACE_UID: uid, **MANAGED}


async def fresh_namespace(kube: Kube, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    await kube.create(NAMESPACES, {"metadata": {"name": name, "labels": {"wspin-test": "1"}}})
    return name


class Cluster:
    """The release namespace (``namespace``), a relay namespace and a workspace namespace."""

    def __init__(self, release: str, relay: str, workspaces: str) -> None:
        self.release, self.relay, self.workspaces = release, relay, workspaces


@pytest.fixture
async def cluster(kube: Kube, namespace: str, real_cluster: bool) -> AsyncIterator[Cluster]:
    relay = await fresh_namespace(kube, "llm-relay")
    workspaces = await fresh_namespace(kube, "team-a")
    try:
        yield Cluster(namespace, relay, workspaces)
    finally:
        if real_cluster:
            for name in (relay, workspaces):
                await kube.delete(NAMESPACES, name)


@pytest.fixture
async def controller(
    kube: Kube, kube_as: Callable[..., Kube], cluster: Cluster
) -> AsyncIterator[Kube]:
    """The controller's service account, with the chart's policy installed for this release
    and Secret access everywhere (what RBAC alone would let it do)."""
    async with controller_under_policy(
        kube,
        kube_as,
        release=cluster.release,
        relay=cluster.relay,
        probe_namespace=cluster.workspaces,
    ) as controller:
        yield controller


async def test_the_controller_writes_its_own_secrets(controller: Kube, cluster: Cluster) -> None:
    ns, relay = cluster.workspaces, cluster.relay
    password = await controller.create(SECRETS, secret("workspace-pw-ws1", owned(UID_A)), ns)
    password["data"] = secret("", value="rotated")["data"]
    await controller.replace(SECRETS, password)
    await controller.create(SECRETS, secret("workspace-relay-ws1", owned(UID_A)), ns)
    await controller.create(
        SECRETS, secret("llm-relay-env-w-openai", envelope_labels(UID_A)), relay
    )
    await controller.patch(
        SECRETS, "llm-relay-env-w-openai", {"data": secret("", value="resealed")["data"]}, relay
    )
    mint = await controller.create(SECRETS, secret("llm-relay-mint-key", MANAGED), relay)
    mint["metadata"]["annotations"] = {"llmsafespaces.dev/rotate-escalation": "now"}
    await controller.replace(SECRETS, mint)
    gone = await controller.delete_collection(
        SECRETS, relay, labels=f"{LABEL_WORKSPACE_UID}={UID_A}"
    )
    assert [s["metadata"]["name"] for s in gone] == ["llm-relay-env-w-openai"]
    # Its own namespace is the namespaced Role's to judge, not this policy's.
    await controller.create(SECRETS, secret("relay-vm-tokens"), cluster.release)


async def test_the_controller_cannot_write_a_secret_it_does_not_own(
    kube: Kube, controller: Kube, cluster: Cluster
) -> None:
    ns = cluster.workspaces
    await kube.create(SECRETS, secret("db-password", value="tenant"), ns)
    attempts = [
        controller.create(SECRETS, secret("db-password-2", owned(UID_A)), ns),
        controller.patch(SECRETS, "db-password", {"data": secret("", value="x")["data"]}, ns),
        controller.delete(SECRETS, "db-password", ns),
        # its names in the wrong namespace
        controller.create(SECRETS, secret("llm-relay-env-w-openai", envelope_labels(UID_A)), ns),
        controller.create(SECRETS, secret("workspace-pw-ws1", owned(UID_A)), cluster.relay),
    ]
    for attempt in attempts:
        with pytest.raises(Forbidden) as refused:
            await attempt
        assert SCOPE in str(refused.value)
    tenant = await kube.get(SECRETS, "db-password", ns)
    assert tenant["data"] == secret("", value="tenant")["data"]


async def test_a_workspaces_secret_carries_its_uid_and_never_passes_to_another(
    controller: Kube, cluster: Cluster
) -> None:
    ns = cluster.workspaces
    with pytest.raises(Forbidden, match="label"):
        await controller.create(SECRETS, secret("workspace-pw-ws1"), ns)
    await controller.create(SECRETS, secret("workspace-pw-ws1", owned(UID_A)), ns)
    with pytest.raises(Forbidden, match="never rewritten for another"):
        await controller.patch(
            SECRETS, "workspace-pw-ws1", {"metadata": {"labels": owned(UID_B)}}, ns
        )
    with pytest.raises(Forbidden, match="never deletes a workspace's Secret"):
        await controller.delete(SECRETS, "workspace-pw-ws1", ns)


async def test_the_routers_key_and_another_workspaces_envelope_are_out_of_reach(
    kube: Kube, controller: Kube, cluster: Cluster
) -> None:
    """The attack of the forged bookkeeping, with the product's own defences taken away: even
    a controller that asks to delete the router's key, or to overwrite Workspace ``w-prod``'s
    envelope for ``w`` + ``prod-openai`` (the same name), is refused."""
    relay = cluster.relay
    router_key = await kube.create(SECRETS, secret("llm-relay-hpke-key", value="private"), relay)
    tenant_b = await controller.create(
        SECRETS, secret("llm-relay-env-w-prod-openai", envelope_labels(UID_B), "b's key"), relay
    )
    planted = await kube.create(SECRETS, secret("llm-relay-env-x-y", value="not ours"), relay)

    with pytest.raises(Forbidden):
        await controller.delete(SECRETS, "llm-relay-hpke-key", relay)
    with pytest.raises(Forbidden):  # a selector that reaches it
        await controller.delete_collection(SECRETS, relay, labels=f"!{LABEL_WORKSPACE_UID}")
    overwrite = secret("llm-relay-env-w-prod-openai", envelope_labels(UID_A), "a's key")
    overwrite["metadata"]["namespace"] = relay
    with pytest.raises(Forbidden, match="never rewritten for another"):
        await controller.replace(SECRETS, overwrite)
    with pytest.raises(Forbidden, match="only the envelopes it wrote"):
        await controller.delete(SECRETS, "llm-relay-env-x-y", relay)

    for survivor in (router_key, tenant_b, planted):
        name = survivor["metadata"]["name"]
        try:
            found = await kube.get(SECRETS, name, relay)
        except NotFound:
            pytest.fail(f"{name} was deleted")
        assert found["data"] == survivor["data"], name
