"""The plain-dict client against the Kubernetes API test server (or a real cluster)."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from tests import stub_http as serving
from wspin.core.errors import KubeAPIError, UnsafeName
from wspin.core.kinds import CONFIGMAPS, LEASES, SECRETS
from wspin.kube.client import Kube


async def test_a_watch_delivers_events_larger_than_aiohttps_line_limit(
    kube: Kube, namespace: str
) -> None:
    listed = await kube.list(CONFIGMAPS, namespace)
    version = listed["metadata"]["resourceVersion"]
    big = "x" * (600 * 1024)  # well over aiohttp's 128 KiB default, under etcd's 1.5 MiB

    async def first_added() -> dict[str, object]:
        async for event in kube.watch(
            CONFIGMAPS, namespace, resource_version=version, timeout_seconds=10
        ):
            if event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "big":
                return dict(event["object"])
        raise AssertionError("watch ended without the ADDED event")

    watching = asyncio.create_task(first_added())
    await asyncio.sleep(0.1)
    await kube.create(CONFIGMAPS, {"metadata": {"name": "big"}, "data": {"blob": big}}, namespace)
    added = await asyncio.wait_for(watching, 10)
    assert added["data"] == {"blob": big}


@pytest.mark.parametrize(
    ("status", "body"),
    [(502, b"<html><body>502 Bad Gateway</body></html>"), (200, b"not json at all")],
)
async def test_a_body_that_is_not_json_is_an_api_error_not_a_crash(
    status: int, body: bytes
) -> None:
    # A proxy or load balancer in front of the API server answers with HTML; callers catch
    # KubeAPIError (the leader elector keeps campaigning, the informer re-lists), so anything
    # else escaping here would stop them for good.
    async def answer(_: web.Request) -> web.Response:
        return web.Response(status=status, body=body, content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{path:.*}", answer)
    runner, port = await serving.start(app, "127.0.0.1", 0)
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    api = client.ApiClient(configuration)
    try:
        with pytest.raises(KubeAPIError, match="not JSON") as caught:
            await Kube(api).get(LEASES, "lease", "ns")
        assert caught.value.status == status
    finally:
        await api.close()
        await runner.cleanup()


UNSAFE_NAMES = ("x/../llm-relay-hpke-key", "..", ".", "", "a/b", "a%2Fb", "a%2e%2e", "a b", "a?b")


@pytest.mark.parametrize("name", UNSAFE_NAMES)
async def test_every_verb_refuses_a_name_that_is_not_one_path_segment(
    kube: Kube, namespace: str, name: str
) -> None:
    """Rule: no name, namespace or subresource goes into a request path unless it is one path
    segment (no ``/``, ``..``, ``%``, nothing); an HTTP client normalises ``x/../y`` to ``y``,
    so the object deleted would be another than the one named. Refused before anything is
    sent: the decoy at the name the path would reach is untouched."""
    decoy = await kube.create(SECRETS, {"metadata": {"name": "llm-relay-hpke-key"}}, namespace)
    calls = [
        kube.get(SECRETS, name, namespace),
        kube.get_or_none(SECRETS, name, namespace),
        kube.delete(SECRETS, name, namespace),
        kube.patch(SECRETS, name, {"metadata": {"labels": {"a": "b"}}}, namespace),
        kube.replace(SECRETS, {"metadata": {"name": name, "namespace": namespace}}),
        kube.create(SECRETS, {"metadata": {"name": name}}, namespace),
        kube.create(SECRETS, {"metadata": {"generateName": "x-"}}, name or "/"),
        kube.list(SECRETS, name or "/"),
        kube.delete_collection(SECRETS, name, labels="a=b"),
        kube.patch(SECRETS, "ok", {}, namespace, sub=name or "/"),
    ]
    for call in calls:
        with pytest.raises(UnsafeName, match="refusing"):
            await call
    with pytest.raises(UnsafeName, match="refusing"):
        async for _ in kube.watch(SECRETS, name or "/"):
            pytest.fail("a watch was opened")
    still = await kube.get(SECRETS, "llm-relay-hpke-key", namespace)
    assert still["metadata"]["uid"] == decoy["metadata"]["uid"]


async def test_a_collection_delete_without_a_selector_is_refused(
    kube: Kube, namespace: str
) -> None:
    with pytest.raises(UnsafeName, match="label selector is empty"):
        await kube.delete_collection(SECRETS, namespace, labels=" ")
