"""The toolkit's writes against the API server: finalizers, status patches, Events with one
per episode, and ConfigMap/Secret data upserts."""

from __future__ import annotations

import base64
import uuid

import pytest

from controller.toolkit.events import EventRecorder
from controller.toolkit.finalizers import add_finalizer, has_finalizer, remove_finalizer
from controller.toolkit.status import write_status
from controller.toolkit.upserts import decode_secret_data, upsert_configmap, upsert_secret
from tests.kubeapi import KubeServer
from wspin.core.errors import Conflict
from wspin.core.kinds import CONFIGMAPS, EVENTS, INFERENCE_RELAYS, SECRETS, WORKSPACES
from wspin.kube.client import Kube

FINALIZER = "inferencerelay.llmsafespaces.dev/finalizer"


async def _relay(kube: Kube) -> dict[str, object]:
    name = f"toolkit-{uuid.uuid4().hex[:8]}"
    # The smallest spec the CRD's schema accepts (the API server validates it).
    spec = {
        "upstreamURL": "https://upstream.example.com",
        "providers": [{"provider": "aws", "region": "us-east-1", "credentialsRef": {"name": "c"}}],
    }
    body = {"metadata": {"name": name}, "spec": spec}
    return await kube.create(INFERENCE_RELAYS, body)


async def test_a_finalizer_is_added_once_and_removed_once(kube: Kube) -> None:
    relay = await _relay(kube)
    try:
        marked = await add_finalizer(kube, INFERENCE_RELAYS, relay, FINALIZER)
        assert has_finalizer(marked, FINALIZER)
        assert await add_finalizer(kube, INFERENCE_RELAYS, marked, FINALIZER) is marked
        with pytest.raises(Conflict):  # a stale object never overwrites a newer list
            await add_finalizer(kube, INFERENCE_RELAYS, relay, "other.example/x")
        assert await remove_finalizer(kube, INFERENCE_RELAYS, marked, FINALIZER)
        live = await kube.get(INFERENCE_RELAYS, relay["metadata"]["name"])  # type: ignore[index]
        assert not has_finalizer(live, FINALIZER)
        assert not await remove_finalizer(kube, INFERENCE_RELAYS, live, FINALIZER)
    finally:
        await kube.delete(INFERENCE_RELAYS, relay["metadata"]["name"])  # type: ignore[index]


async def test_a_status_write_is_one_merge_patch_and_nothing_when_unchanged(kube: Kube) -> None:
    relay = await _relay(kube)
    name = relay["metadata"]["name"]  # type: ignore[index]
    try:
        written = await write_status(
            kube, INFERENCE_RELAYS, relay, {"healthyReplicas": 1, "instances": []}
        )
        assert written is not None and written["status"]["healthyReplicas"] == 1
        assert await write_status(kube, INFERENCE_RELAYS, written, written["status"]) is None
        dropped = await write_status(kube, INFERENCE_RELAYS, written, {"instances": []})
        assert dropped is not None and "healthyReplicas" not in dropped["status"]
    finally:
        await kube.delete(INFERENCE_RELAYS, name)
    assert await write_status(kube, INFERENCE_RELAYS, relay, {"instances": [1]}) is None


async def test_one_event_per_episode_and_a_new_episode_gets_its_own(
    kube: Kube, namespace: str
) -> None:
    obj = {"metadata": {"name": "thing", "namespace": namespace, "uid": str(uuid.uuid4())}}
    recorder = EventRecorder(kube, redact=lambda text: text.replace("s3cret", "[redacted]"))
    for _ in range(3):
        await recorder.emit(obj, CONFIGMAPS, "Warning", "Broke", "key s3cret", episode="pod-1")
    assert await recorder.emit(obj, CONFIGMAPS, "Warning", "Broke", "again", episode="pod-2")
    events = (await kube.list(EVENTS, namespace)).get("items") or []
    mine = [e for e in events if e["involvedObject"].get("uid") == obj["metadata"]["uid"]]
    assert sorted(e["message"] for e in mine) == ["again", "key [redacted]"]
    assert {e["reason"] for e in mine} == {"Broke"} and {e["type"] for e in mine} == {"Warning"}


async def test_a_failed_event_write_is_dropped_not_raised(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    obj = {"metadata": {"name": "thing", "namespace": namespace, "uid": "u"}}
    kube_server.fail_next(500, method="POST", path=f"/api/v1/namespaces/{namespace}/events")
    recorder = EventRecorder(kube)
    assert not await recorder.emit(obj, CONFIGMAPS, "Normal", "R", "m", episode="e")
    assert await recorder.emit(obj, CONFIGMAPS, "Normal", "R", "m", episode="e")  # retried


async def test_configmap_upsert_creates_replaces_and_skips_an_unchanged_body(
    kube: Kube, namespace: str
) -> None:
    name = f"cm-{uuid.uuid4().hex[:8]}"
    assert await upsert_configmap(kube, namespace, name, {"k": "v1"})
    version = (await kube.get(CONFIGMAPS, name, namespace))["metadata"]["resourceVersion"]
    assert not await upsert_configmap(kube, namespace, name, {"k": "v1"})
    assert (await kube.get(CONFIGMAPS, name, namespace))["metadata"]["resourceVersion"] == version
    assert await upsert_configmap(kube, namespace, name, {"k": "v2"})
    assert (await kube.get(CONFIGMAPS, name, namespace))["data"] == {"k": "v2"}


async def test_secret_upsert_holds_exactly_the_values_base64_encoded(
    kube: Kube, namespace: str
) -> None:
    name = f"sec-{uuid.uuid4().hex[:8]}"
    assert await upsert_secret(kube, namespace, name, {"a": "1", "b": "2"})
    assert await upsert_secret(kube, namespace, name, {"a": "1"})
    secret = await kube.get(SECRETS, name, namespace)
    assert secret["data"] == {"a": base64.b64encode(b"1").decode()}
    assert secret["type"] == "Opaque"
    assert decode_secret_data(secret) == {"a": "1"}
    assert not await upsert_secret(kube, namespace, name, {"a": "1"})


async def test_event_and_status_messages_lose_the_credentials_of_urls(
    kube: Kube, namespace: str
) -> None:
    """A reason's words may quote what a user wrote (a package source, an image): the user and
    password of a URL in them never reach an Event or the status."""
    quoted = "pip could not fetch git+https://deploy:ghp_tok3n@git.example.com/r.git"
    stripped = "pip could not fetch git+https://***@git.example.com/r.git"
    obj = {"metadata": {"name": "thing", "namespace": namespace, "uid": str(uuid.uuid4())}}
    assert await EventRecorder(kube).emit(obj, CONFIGMAPS, "Warning", "Failed", quoted)
    events = (await kube.list(EVENTS, namespace)).get("items") or []
    assert [e["message"] for e in events if e["reason"] == "Failed"] == [stripped]
    ws = await kube.create(
        WORKSPACES, {"metadata": {"name": "ws1"}, "spec": {"runtime": "python"}}, namespace
    )
    written = await write_status(kube, WORKSPACES, ws, {"phase": "Failed", "message": quoted})
    assert written is not None and written["status"]["message"] == stripped
