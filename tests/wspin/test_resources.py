"""The plain-dict client against the Kubernetes API test server (or a real cluster)."""

from __future__ import annotations

import asyncio

from wspin.resources import CONFIGMAPS, Kube


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
