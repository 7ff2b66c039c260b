"""Deletion: finalizers, ownerReference garbage collection, namespaces, pods."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.support.waiting import eventually
from wspin.core.errors import Invalid
from wspin.core.kinds import CONFIGMAPS, INFERENCE_RELAYS, NAMESPACES, PODS, WORKSPACES
from wspin.kube.client import Kube

FINALIZER = "inferencerelay.llmsafespaces.dev/finalizer"

#: The smallest InferenceRelay spec the CRD's schema accepts (a real API server prunes and
#: validates it, and so does the test server).
RELAY_SPEC = {
    "upstreamURL": "https://upstream.example.com",
    "providers": [{"provider": "aws", "region": "us-east-1", "credentialsRef": {"name": "c"}}],
}


def _owned_by(owner: dict[str, Any], name: str) -> dict[str, Any]:
    ref = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    return {"metadata": {"name": name, "ownerReferences": [ref]}}


async def _absent(kube: Kube, res: Any, name: str) -> bool:
    return await kube.get_or_none(res, name) is None


async def _equals(value: Any, expected: Any) -> bool:
    return bool(await value == expected)


async def _gone(kube: Kube, res: Any, name: str, namespace: str | None = None) -> bool:
    """Garbage collection and namespace deletion are asynchronous on a cluster (the namespace
    controller's pass waits on discovery, seconds on a busy one): wait for the 404."""

    async def absent() -> bool:
        return await kube.get_or_none(res, name, namespace) is None

    await eventually(absent, f"{res.plural} {namespace}/{name} deleted", timeout=60)
    return True


async def test_finalizer_keeps_the_object_with_a_deletion_timestamp_until_removed(
    kube: Kube,
) -> None:
    relay = {"metadata": {"name": "r1", "finalizers": [FINALIZER]}, "spec": RELAY_SPEC}
    await kube.create(INFERENCE_RELAYS, relay)
    try:
        await kube.delete(INFERENCE_RELAYS, "r1")
        marked = await kube.get(INFERENCE_RELAYS, "r1")
        assert marked["metadata"]["deletionTimestamp"]
        assert marked["metadata"]["finalizers"] == [FINALIZER]
    finally:
        await kube.patch(INFERENCE_RELAYS, "r1", {"metadata": {"finalizers": None}})
    assert await _gone(kube, INFERENCE_RELAYS, "r1")


async def test_no_new_finalizer_may_be_added_while_deleting(kube: Kube, namespace: str) -> None:
    await kube.create(CONFIGMAPS, {"metadata": {"name": "a", "finalizers": ["x/y"]}}, namespace)
    await kube.delete(CONFIGMAPS, "a", namespace)
    try:
        with pytest.raises(Invalid):
            await kube.patch(
                CONFIGMAPS, "a", {"metadata": {"finalizers": ["x/y", "x/z"]}}, namespace
            )
    finally:
        await kube.patch(CONFIGMAPS, "a", {"metadata": {"finalizers": None}}, namespace)


async def test_dependents_are_garbage_collected_with_their_owner(
    kube: Kube, namespace: str
) -> None:
    ws = await kube.create(WORKSPACES, {"metadata": {"name": "w"}, "spec": {}}, namespace)
    await kube.create(CONFIGMAPS, _owned_by(ws, "w-config"), namespace)
    await kube.create(CONFIGMAPS, {"metadata": {"name": "unowned"}}, namespace)
    await kube.delete(WORKSPACES, "w", namespace)
    assert await _gone(kube, CONFIGMAPS, "w-config", namespace)
    assert await kube.get_or_none(CONFIGMAPS, "unowned", namespace) is not None


async def test_cluster_scoped_owner_collects_namespaced_dependents(
    kube: Kube, namespace: str
) -> None:
    relay = await kube.create(INFERENCE_RELAYS, {"metadata": {"name": "r2"}, "spec": RELAY_SPEC})
    await kube.create(CONFIGMAPS, _owned_by(relay, "r2-peers"), namespace)
    await kube.delete(INFERENCE_RELAYS, "r2")
    assert await _gone(kube, CONFIGMAPS, "r2-peers", namespace)


async def test_a_dependent_with_another_live_owner_only_loses_the_reference(
    kube: Kube, namespace: str
) -> None:
    one = await kube.create(CONFIGMAPS, {"metadata": {"name": "one"}}, namespace)
    two = await kube.create(CONFIGMAPS, {"metadata": {"name": "two"}}, namespace)
    body = _owned_by(one, "shared")
    body["metadata"]["ownerReferences"] += _owned_by(two, "x")["metadata"]["ownerReferences"]
    body["metadata"]["ownerReferences"][1]["controller"] = False
    await kube.create(CONFIGMAPS, body, namespace)
    await kube.delete(CONFIGMAPS, "one", namespace)

    async def owners() -> list[str]:
        shared = await kube.get(CONFIGMAPS, "shared", namespace)
        return [r["name"] for r in shared["metadata"]["ownerReferences"]]

    # Garbage collection is asynchronous on a cluster.
    await eventually(lambda: _equals(owners(), ["two"]), "the dead owner's reference dropped")
    assert await owners() == ["two"]


async def test_pods_are_deleted_at_once_without_a_kubelet(kube: Kube, namespace: str) -> None:
    spec = {"containers": [{"name": "workspace", "image": "i"}]}
    await kube.create(PODS, {"metadata": {"name": "p"}, "spec": spec}, namespace)
    await kube.delete(PODS, "p", namespace, grace_seconds=30)
    assert await kube.get_or_none(PODS, "p", namespace) is None


async def test_deleting_a_namespace_deletes_its_content(kube: Kube) -> None:
    doomed = f"doomed-{uuid.uuid4().hex[:8]}"
    await kube.create(NAMESPACES, {"metadata": {"name": doomed}})
    await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}}, doomed)
    await kube.create(CONFIGMAPS, {"metadata": {"name": "held", "finalizers": ["x/y"]}}, doomed)
    await kube.delete(NAMESPACES, doomed)
    terminating = await kube.get(NAMESPACES, doomed)
    assert terminating["status"]["phase"] == "Terminating"
    # The namespace controller empties it (asynchronously, on a cluster); the finalizer holds
    # its object, and so the namespace, until removed.
    assert await _gone(kube, CONFIGMAPS, "a", doomed)
    held = await kube.get(CONFIGMAPS, "held", doomed)
    assert held["metadata"].get("deletionTimestamp")
    await kube.patch(CONFIGMAPS, "held", {"metadata": {"finalizers": None}}, doomed)
    # The namespace controller retries a namespace it found not yet empty with a backoff.
    await eventually(lambda: _absent(kube, NAMESPACES, doomed), "the namespace gone", timeout=60)


async def test_dry_run_delete_keeps_the_object(kube: Kube, namespace: str) -> None:
    await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)
    await kube.request(
        "DELETE", CONFIGMAPS.path(namespace, "a"), query={"dryRun": "All"}, body=None
    )
    assert await kube.get_or_none(CONFIGMAPS, "a", namespace) is not None
