"""The plain-dict client against the Kubernetes API test server (or a real cluster)."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from tests import stub_http as serving
from wspin.core.errors import KubeAPIError
from wspin.core.kinds import CONFIGMAPS, LEASES
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
