"""Watches: initial state, resume, 410 after compaction, bookmarks, selectors, timeouts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from contextlib import aclosing
from typing import Any, TypeVar, cast

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubeapi import KubeServer
from tests.support.waiting import eventually
from wspin.core.errors import Gone, KubeAPIError
from wspin.core.kinds import CONFIGMAPS
from wspin.kube.client import Kube

Event = dict[str, Any]
T = TypeVar("T")
OURS = {"wspin-test/watched": "yes"}
SELECT_OURS = "wspin-test/watched=yes"


def _closing(stream: AsyncIterator[Event]) -> aclosing[AsyncGenerator[Event, None]]:
    return aclosing(cast(AsyncGenerator[Event, None], stream))


async def _take(stream: AsyncIterator[Event], count: int) -> list[Event]:
    """The next ``count`` events, BOOKMARKs skipped, or fail after 5 s."""
    events: list[Event] = []
    async with asyncio.timeout(5):
        async for event in stream:
            if event["type"] != "BOOKMARK":
                events.append(event)
            if len(events) == count:
                break
    return events


async def _once_watching(server: KubeServer, consumer: Awaitable[T]) -> asyncio.Task[T]:
    """Run ``consumer`` and return once the server holds its watch open."""
    task = asyncio.ensure_future(consumer)
    async with asyncio.timeout(5):
        while server.open_watches == 0 and not task.done():
            await asyncio.sleep(0.005)
    return task


def _summary(events: list[Event]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


async def test_watch_without_resource_version_starts_with_current_objects(
    kube: Kube, namespace: str
) -> None:
    # Selected by label: a real cluster adds its own ConfigMap (kube-root-ca.crt) to every
    # namespace, whenever its controller gets to it.
    await kube.create(CONFIGMAPS, {"metadata": {"name": "a", "labels": OURS}}, namespace)
    watching = kube.watch(CONFIGMAPS, namespace, labels=SELECT_OURS, timeout_seconds=10)
    async with _closing(watching) as stream:
        initial = await _take(stream, 1)
        await kube.patch(CONFIGMAPS, "a", {"data": {"k": "v"}}, namespace)
        await kube.delete(CONFIGMAPS, "a", namespace)
        live = await _take(stream, 2)
    assert _summary(initial + live) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    assert live[0]["object"]["data"] == {"k": "v"}


async def test_watch_resumes_after_the_given_resource_version(kube: Kube, namespace: str) -> None:
    await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)
    listed = await kube.list(CONFIGMAPS, namespace)
    await kube.create(CONFIGMAPS, {"metadata": {"name": "b"}}, namespace)
    rv = listed["metadata"]["resourceVersion"]
    watching = kube.watch(CONFIGMAPS, namespace, resource_version=rv, timeout_seconds=10)
    async with _closing(watching) as stream:
        assert _summary(await _take(stream, 1)) == [("ADDED", "b")]


async def test_no_op_write_emits_no_event(kube: Kube, namespace: str) -> None:
    body = {"metadata": {"name": "a", "labels": OURS}, "data": {"k": "v"}}
    cm = await kube.create(CONFIGMAPS, body, namespace)
    await kube.replace(CONFIGMAPS, cm)
    await kube.patch(CONFIGMAPS, "a", {"data": {"k": "w"}}, namespace)
    rv = cm["metadata"]["resourceVersion"]
    watching = kube.watch(
        CONFIGMAPS, namespace, labels=SELECT_OURS, resource_version=rv, timeout_seconds=10
    )
    async with _closing(watching) as stream:
        events = await _take(stream, 1)
    assert events[0]["type"] == "MODIFIED" and events[0]["object"]["data"] == {"k": "w"}


async def test_objects_entering_and_leaving_a_selector_are_added_and_deleted(
    kube: Kube, namespace: str
) -> None:
    await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)
    rv = (await kube.list(CONFIGMAPS, namespace))["metadata"]["resourceVersion"]
    await kube.patch(CONFIGMAPS, "a", {"metadata": {"labels": {"team": "x"}}}, namespace)
    left = await kube.patch(CONFIGMAPS, "a", {"metadata": {"labels": {"team": "y"}}}, namespace)
    watching = kube.watch(
        CONFIGMAPS, namespace, labels="team=x", resource_version=rv, timeout_seconds=10
    )
    async with _closing(watching) as stream:
        events = await _take(stream, 2)
    assert _summary(events) == [("ADDED", "a"), ("DELETED", "a")]
    # The DELETED event carries the object as the watcher last saw it (still selected), at
    # the resourceVersion of the change that took it out of the selection.
    gone = events[1]["object"]["metadata"]
    assert gone["labels"] == {"team": "x"}
    assert gone["resourceVersion"] == left["metadata"]["resourceVersion"]


async def test_watch_ends_when_timeout_seconds_elapse(kube: Kube, namespace: str) -> None:
    async with asyncio.timeout(5):
        watching = kube.watch(CONFIGMAPS, namespace, labels=SELECT_OURS, timeout_seconds=1)
        events = [e async for e in watching]
    assert all(e["type"] == "BOOKMARK" for e in events)


async def test_resuming_from_a_compacted_resource_version_is_410_expired(
    kube_server: KubeServer, kube: Kube, namespace: str
) -> None:
    cm = await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)
    await kube.patch(CONFIGMAPS, "a", {"data": {"k": "v"}}, namespace)
    kube_server.compact()
    rv = cm["metadata"]["resourceVersion"]
    with pytest.raises(Gone) as caught:
        async with _closing(kube.watch(CONFIGMAPS, namespace, resource_version=rv)) as stream:
            await _take(stream, 1)
    assert caught.value.reason == "Expired"


async def test_generated_client_watch_retries_410_once_then_raises(
    kube_server: KubeServer, kube_api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    cm = await core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a"))
    )
    await core.delete_namespaced_config_map("a", namespace)
    kube_server.compact()
    rv = cm.metadata.resource_version
    with pytest.raises(ApiException) as caught:
        async with watch.Watch() as w, asyncio.timeout(5):
            async for _ in w.stream(
                core.list_namespaced_config_map, namespace, resource_version=rv
            ):
                pass
    assert caught.value.status == 410


async def test_generated_client_watch_sees_typed_events(
    kube_api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a"), data={"k": "v"})
    await core.create_namespaced_config_map(namespace, body)
    async with watch.Watch() as w, asyncio.timeout(5):
        async for event in w.stream(core.list_namespaced_config_map, namespace, timeout_seconds=5):
            assert event["type"] == "ADDED"
            assert event["object"].data == {"k": "v"}
            assert event["raw_object"]["metadata"]["name"] == "a"
            break


async def test_bookmarks_come_only_when_allowed_and_carry_the_resource_version(
    kube_server: KubeServer, kube_api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    kube_server.bookmark_interval = 60.0

    async def first_event(w: watch.Watch, rv: str, allow: bool) -> Event:
        stream = w.stream(
            core.list_namespaced_config_map,
            namespace,
            resource_version=rv,
            allow_watch_bookmarks=allow,
            timeout_seconds=5,
        )
        async for event in stream:
            return cast(Event, event)
        raise AssertionError("the watch ended without an event")

    for allow in (False, True):
        # The server ends the watch the last round closed when it sees the client gone; a
        # signal sent before then would count that watch instead of this round's.
        await eventually(lambda: kube_server.open_watches == 0, "the last round's watch ended")
        rv = (await core.list_namespaced_config_map(namespace)).metadata.resource_version
        async with watch.Watch() as w, asyncio.timeout(5):
            task = await _once_watching(kube_server, first_event(w, rv, allow))
            assert kube_server.send_bookmarks() == 1
            meta = client.V1ObjectMeta(generate_name="b-")
            await core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta))
            event = await task
        if allow:
            assert event["type"] == "BOOKMARK"
            assert event["raw_object"]["metadata"] == {"resourceVersion": rv}
        else:
            assert event["type"] == "ADDED"


async def test_dropped_watches_end_cleanly_or_break_when_aborted(
    kube_server: KubeServer, kube: Kube, namespace: str
) -> None:
    kube_server.bookmark_interval = 60.0

    async def drain() -> int:
        async with _closing(kube.watch(CONFIGMAPS, namespace, timeout_seconds=30)) as stream:
            return len([e async for e in stream])

    ended = await _once_watching(kube_server, drain())
    assert kube_server.drop_watches() == 1
    assert await asyncio.wait_for(ended, 5) == 0
    broken = await _once_watching(kube_server, drain())
    assert kube_server.drop_watches(abort=True) == 1
    with pytest.raises(KubeAPIError, match="stream broke"):
        await asyncio.wait_for(broken, 5)
