"""The informer keeps a faithful cache across 410 Gone, dropped connections and API errors."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import AsyncIterator

import pytest

from controller.types import Obj, ObjectKey
from tests.fixtures import ADMISSION
from tests.kubeapi import KubeServer
from tests.support.waiting import eventually
from wspin.core.kinds import CONFIGMAPS, NAMESPACES
from wspin.kube.client import Kube
from wspin.kube.compaction import Compactor
from wspin.kube.informer import EventType, Informer

Seen = list[tuple[EventType, str]]


#: Every ConfigMap a test makes carries it, and every informer here selects it: a real cluster
#: adds its own ConfigMap (kube-root-ca.crt) to each namespace, whenever its controller runs.
OURS = "wspin-test/informed"


def configmap(name: str, namespace: str, **labels: str) -> Obj:
    meta = {"name": name, "namespace": namespace, "labels": {OURS: "yes", **labels}}
    return {"metadata": meta, "data": {}}


@contextlib.asynccontextmanager
async def informing(informer: Informer) -> AsyncIterator[Seen]:
    seen: Seen = []
    informer.add_handler(lambda kind, obj, old: seen.append((kind, obj["metadata"]["name"])))
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), 5)
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def fast(kube: Kube, namespace: str, labels: str = "", **kwargs: object) -> Informer:
    selector = ",".join(filter(None, (f"{OURS}=yes", labels)))
    return Informer(
        kube,
        CONFIGMAPS,
        namespace=namespace,
        labels=selector,
        backoff_initial=0.02,
        **kwargs,  # type: ignore[arg-type]
    )


async def test_the_first_list_fills_the_cache_and_reports_added(kube: Kube, namespace: str) -> None:
    await kube.create(CONFIGMAPS, configmap("a", namespace), namespace)
    await kube.create(CONFIGMAPS, configmap("b", namespace, team="x"), namespace)
    informer = fast(kube, namespace)
    async with informing(informer) as seen:
        assert sorted(seen) == [("ADDED", "a"), ("ADDED", "b")]
        assert informer.get(ObjectKey(namespace, "a")) is not None
        assert informer.get(ObjectKey(namespace, "missing")) is None
        assert [o["metadata"]["name"] for o in informer.list(namespace, {"team": "x"})] == ["b"]
        assert informer.list("other-namespace") == []


async def test_watch_events_update_the_cache_in_order(kube: Kube, namespace: str) -> None:
    informer = fast(kube, namespace)
    async with informing(informer) as seen:
        await kube.create(CONFIGMAPS, configmap("a", namespace), namespace)
        await kube.patch(CONFIGMAPS, "a", {"data": {"k": "v"}}, namespace)
        await kube.delete(CONFIGMAPS, "a", namespace)
        await eventually(lambda: len(seen) == 3)
        assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
        assert informer.get(ObjectKey(namespace, "a")) is None


async def test_managed_fields_are_not_kept_in_the_cache(kube: Kube, namespace: str) -> None:
    obj = configmap("a", namespace)
    obj["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    await kube.create(CONFIGMAPS, obj, namespace)
    informer = fast(kube, namespace)
    async with informing(informer):
        await kube.patch(CONFIGMAPS, "a", {"data": {"k": "v"}}, namespace)
        await eventually(lambda: (informer.get(ObjectKey(namespace, "a")) or {}).get("data") != {})
        cached = informer.get(ObjectKey(namespace, "a"))
        assert cached is not None and "managedFields" not in cached["metadata"]


async def test_the_label_selector_scopes_the_cache(kube: Kube, namespace: str) -> None:
    informer = fast(kube, namespace, labels="team=x")
    async with informing(informer) as seen:
        await kube.create(CONFIGMAPS, configmap("other", namespace), namespace)
        await kube.create(CONFIGMAPS, configmap("ours", namespace, team="x"), namespace)
        await eventually(lambda: ("ADDED", "ours") in seen)
        assert informer.get(ObjectKey(namespace, "other")) is None


async def test_watch_survives_a_410_gone_without_losing_an_event(
    kube: Kube, namespace: str, kube_server: KubeServer, caplog: pytest.LogCaptureFixture
) -> None:
    await kube.create(CONFIGMAPS, configmap("kept", namespace), namespace)
    await kube.create(CONFIGMAPS, configmap("doomed", namespace), namespace)
    caplog.set_level(logging.INFO, logger="wspin.informer")
    informer = fast(kube, namespace)
    async with informing(informer) as seen:
        # End the watch; its resumption is answered 410 Gone, and the changes below land in
        # the gap (after the old watch's end, before or after the re-list: either way none
        # may be lost).
        kube_server.fail_next(410, method="GET", path=f"/api/v1/namespaces/{namespace}/configmaps")
        kube_server.drop_watches()
        await kube.create(CONFIGMAPS, configmap("born", namespace), namespace)
        await kube.patch(CONFIGMAPS, "kept", {"data": {"k": "v"}}, namespace)
        await kube.delete(CONFIGMAPS, "doomed", namespace)
        await eventually(lambda: informer.relists >= 2)
        assert any(r.getMessage().startswith("watch expired (410)") for r in caplog.records)
        await eventually(lambda: len(seen) >= 5)
        assert sorted(seen[2:]) == [("ADDED", "born"), ("DELETED", "doomed"), ("MODIFIED", "kept")]
        assert sorted(o["metadata"]["name"] for o in informer.list(namespace)) == ["born", "kept"]
        # and the new watch carries on from the re-list
        await kube.create(CONFIGMAPS, configmap("after", namespace), namespace)
        await eventually(lambda: ("ADDED", "after") in seen)


async def test_a_compacted_history_makes_the_resumed_watch_relist(
    kube: Kube, namespace: str, kube_server: KubeServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="wspin.informer")
    informer = fast(kube, namespace)
    async with informing(informer) as seen:
        await kube.create(CONFIGMAPS, configmap("a", namespace), namespace)
        await eventually(lambda: ("ADDED", "a") in seen)
        # A write elsewhere moves the server past the informer's version; compacting then
        # makes resuming from that version answer 410.
        other = f"{namespace}-other"
        await kube.create(NAMESPACES, {"metadata": {"name": other}})
        kube_server.compact()
        kube_server.drop_watches()
        await eventually(lambda: informer.relists >= 2)
        assert any(r.getMessage().startswith("watch expired (410)") for r in caplog.records)
        await kube.create(CONFIGMAPS, configmap("b", namespace), namespace)
        await eventually(lambda: ("ADDED", "b") in seen)
        assert seen.count(("ADDED", "a")) == 1, "a re-list must not re-announce unchanged objects"


async def test_watch_survives_a_cut_connection_without_losing_an_event(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    informer = fast(kube, namespace)
    async with informing(informer) as seen:
        await kube.create(CONFIGMAPS, configmap("a", namespace), namespace)
        await eventually(lambda: ("ADDED", "a") in seen)
        assert kube_server.drop_watches(abort=True) >= 1
        await kube.create(CONFIGMAPS, configmap("b", namespace), namespace)
        await kube.delete(CONFIGMAPS, "a", namespace)
        await eventually(lambda: ("ADDED", "b") in seen and ("DELETED", "a") in seen)
        assert informer.get(ObjectKey(namespace, "a")) is None
        assert informer.get(ObjectKey(namespace, "b")) is not None


async def test_bookmarks_move_the_resource_version_forward(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    informer = fast(kube, namespace)
    async with informing(informer):
        listed = informer.resource_version
        # A change elsewhere moves the server's version; a bookmark tells the informer.
        other = f"{namespace}-other"
        await kube.create(NAMESPACES, {"metadata": {"name": other}})
        await kube.create(CONFIGMAPS, configmap("elsewhere", other), other)
        await eventually(
            lambda: kube_server.send_bookmarks() > 0 and informer.resource_version != listed
        )
        assert int(informer.resource_version) > int(listed)


async def test_a_failing_list_is_retried_with_backoff_until_it_succeeds(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    await kube.create(CONFIGMAPS, configmap("a", namespace), namespace)
    kube_server.fail_next(
        500, method="GET", path=f"/api/v1/namespaces/{namespace}/configmaps", count=3
    )
    informer = fast(kube, namespace)
    async with informing(informer) as seen:
        assert seen == [("ADDED", "a")]
        assert informer.has_synced


async def test_a_handler_added_after_sync_first_receives_the_cached_objects(
    kube: Kube, namespace: str
) -> None:
    await kube.create(CONFIGMAPS, configmap("a", namespace), namespace)
    informer = fast(kube, namespace)
    async with informing(informer):
        late: Seen = []
        informer.add_handler(lambda kind, obj, old: late.append((kind, obj["metadata"]["name"])))
        assert late == [("ADDED", "a")]


async def test_a_failing_handler_does_not_stop_the_others(kube: Kube, namespace: str) -> None:
    informer = fast(kube, namespace)

    def broken(kind: EventType, obj: Obj, old: Obj | None) -> None:
        raise RuntimeError("boom")

    informer.add_handler(broken)
    async with informing(informer) as seen:
        await kube.create(CONFIGMAPS, configmap("a", namespace), namespace)
        await eventually(lambda: ("ADDED", "a") in seen)


async def test_modified_events_carry_the_previous_version(kube: Kube, namespace: str) -> None:
    count = 3
    informer = fast(kube, namespace)
    pairs: list[tuple[str | None, str]] = []
    informer.add_handler(
        lambda kind, obj, old: pairs.append(
            ((old or {}).get("data", {}).get("n"), obj.get("data", {}).get("n"))
        )
    )
    async with informing(informer):
        await kube.create(CONFIGMAPS, {**configmap("a", namespace), "data": {"n": "0"}}, namespace)
        for n in range(1, count):
            await kube.patch(CONFIGMAPS, "a", {"data": {"n": str(n)}}, namespace)
        await eventually(lambda: len(pairs) == count)
        assert pairs == [(None, "0"), ("0", "1"), ("1", "2")]


FIXTURES = ADMISSION


SAMPLE = 1000


def captured(name: str) -> Obj:
    review = json.loads((FIXTURES / name).read_text())
    obj: Obj = review["request"]["object"]
    return obj


def deep_size(root: object) -> int:
    """Bytes of every distinct object reachable from ``root`` through dicts and lists; an
    object shared by many cached objects (an interned string) counts once, as in memory."""
    seen: set[int] = set()
    total, stack = 0, [root]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return total


def test_ten_thousand_workspaces_and_their_pods_fit_the_memory_budget() -> None:
    """Measured on 1,000 captured pod+Workspace pairs (each decoded on its own, as watch
    events are), extrapolated to 10,000 against the controller's 250 MiB memory budget."""
    pod = captured("pod-create-workspace-already-injected.json")
    pod["status"] = {
        "phase": "Running",
        "podIP": "10.1.2.3",
        "containerStatuses": [
            {
                "name": c["name"],
                "image": c["image"],
                "imageID": c["image"],
                "containerID": "containerd://" + "a" * 64,
                "ready": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
            }
            for c in pod["spec"]["containers"]
        ],
    }
    workspace = captured("workspace-create.json")
    pod_text, ws_text = json.dumps(pod), json.dumps(workspace)
    pod_name, ws_name = pod["metadata"]["name"], workspace["metadata"]["name"]
    assert "managedFields" in pod["metadata"], "the capture must include managedFields"
    compact = Compactor()
    cache = [
        compact(json.loads(text.replace(name, f"{name}-{i}")))
        for i in range(SAMPLE)
        for text, name in ((pod_text, pod_name), (ws_text, ws_name))
    ]
    projected = deep_size(cache) * 10_000 / SAMPLE
    assert projected < 250 * 2**20, f"{projected / 2**20:.0f} MiB for 10,000 pairs"
    assert cache[0]["spec"] == Compactor()(json.loads(pod_text))["spec"]


def lists(server: KubeServer, namespace: str) -> list[dict[str, str]]:
    """The query of every list (not watch) of configmaps in ``namespace``, in order."""
    path = CONFIGMAPS.path(namespace)
    return [r.query for r in server.requests if r.path == path and not r.is_watch]


async def test_the_start_up_list_is_requested_in_pages_and_followed_through_continue(
    kube: Kube, kube_server: KubeServer, namespace: str
) -> None:
    for name in "abcde":
        await kube.create(CONFIGMAPS, configmap(name, namespace), namespace)
    kube_server.requests.clear()
    informer = fast(kube, namespace, page_size=2)
    async with informing(informer) as seen:
        assert sorted(name for _, name in seen) == list("abcde")
        pages = lists(kube_server, namespace)
        assert [q.get("limit") for q in pages] == ["2", "2", "2"]
        assert "continue" not in pages[0]
        assert all(q.get("continue") for q in pages[1:])
        assert pages[1]["continue"] != pages[2]["continue"]
        await eventually(lambda: any(r.is_watch for r in kube_server.requests))
        (watch,) = [r for r in kube_server.requests if r.is_watch]
        assert watch.query["resourceVersion"] == informer.resource_version
        assert informer.relists == 1


async def test_an_expired_continue_token_starts_the_list_over_at_once(
    kube: Kube, kube_server: KubeServer, namespace: str
) -> None:
    for name in "abcde":
        await kube.create(CONFIGMAPS, configmap(name, namespace), namespace)
    kube_server.requests.clear()
    kube_server.fail_next(410, method="GET", path=CONFIGMAPS.path(namespace), query="continue")
    informer = fast(kube, namespace, page_size=2)
    async with informing(informer) as seen:
        assert sorted(name for _, name in seen) == list("abcde")
        pages = lists(kube_server, namespace)
        assert ["continue" in q for q in pages] == [False, True, False, True, True]
        assert informer.relists == 1
