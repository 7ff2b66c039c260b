"""Chunked lists as a client sees them: one consistent snapshot across pages, 410 once the
snapshot is compacted, 400 for a token that does not decode."""

from __future__ import annotations

import pytest

from tests.kubeapi import KubeServer
from wspin.core.errors import Gone, KubeAPIError
from wspin.core.kinds import CONFIGMAPS, SECRETS, Resource
from wspin.kube.client import Kube


async def make(kube: Kube, namespace: str, *names: str, kind: Resource = CONFIGMAPS) -> None:
    for name in names:
        await kube.create(kind, {"metadata": {"name": name}}, namespace)


async def test_later_pages_come_from_the_first_pages_snapshot(kube: Kube, namespace: str) -> None:
    # Secrets: a new namespace on a real cluster holds none of its own (it gets a ConfigMap,
    # kube-root-ca.crt, that would count among the remaining items).
    await make(kube, namespace, "a", "b", "c", "d", kind=SECRETS)
    first = await kube.list(SECRETS, namespace, limit=2)
    assert [i["metadata"]["name"] for i in first["items"]] == ["a", "b"]
    assert first["metadata"]["remainingItemCount"] == 2
    # Changes after the first page: none of them shows up in the rest of this list.
    await kube.delete(SECRETS, "c", namespace)
    await make(kube, namespace, "e", kind=SECRETS)
    await kube.patch(SECRETS, "d", {"data": {"k": "dg=="}}, namespace)
    rest = await kube.list(
        SECRETS, namespace, limit=2, continue_token=first["metadata"]["continue"]
    )
    assert [i["metadata"]["name"] for i in rest["items"]] == ["c", "d"]
    assert "data" not in rest["items"][1]
    assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert not rest["metadata"].get("continue")
    fresh = await kube.list(SECRETS, namespace)
    assert [i["metadata"]["name"] for i in fresh["items"]] == ["a", "b", "d", "e"]


async def test_pages_with_a_selector_are_full_and_do_not_count_the_rest(
    kube: Kube, namespace: str
) -> None:
    for name, team in (("a", "x"), ("b", "y"), ("c", "x"), ("d", "x")):
        body = {"metadata": {"name": name, "labels": {"team": team}}}
        await kube.create(CONFIGMAPS, body, namespace)
    first = await kube.list(CONFIGMAPS, namespace, labels="team=x", limit=2)
    assert [i["metadata"]["name"] for i in first["items"]] == ["a", "c"]
    assert "remainingItemCount" not in first["metadata"]
    pages = [
        page async for page in kube.list_pages(CONFIGMAPS, namespace, labels="team=x", limit=2)
    ]
    assert [[i["metadata"]["name"] for i in p["items"]] for p in pages] == [["a", "c"], ["d"]]


async def test_a_continue_token_past_compaction_is_410_expired(
    kube: Kube, kube_server: KubeServer, namespace: str
) -> None:
    await make(kube, namespace, "a", "b", "c")
    first = await kube.list(CONFIGMAPS, namespace, limit=2)
    await make(kube, namespace, "d")
    kube_server.compact()
    with pytest.raises(Gone) as caught:
        await kube.list(
            CONFIGMAPS, namespace, limit=2, continue_token=first["metadata"]["continue"]
        )
    assert caught.value.reason == "Expired"
    assert "too old to display a consistent list result" in caught.value.message


async def test_a_continue_token_that_does_not_decode_is_a_bad_request(
    kube: Kube, namespace: str
) -> None:
    with pytest.raises(KubeAPIError) as caught:
        await kube.list(CONFIGMAPS, namespace, limit=2, continue_token="not-a-token")
    assert caught.value.status == 400
