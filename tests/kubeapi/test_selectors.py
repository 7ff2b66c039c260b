"""Label and field selectors, on their own and over HTTP."""

from __future__ import annotations

import pytest

from tests.kubeapi.kinds import BUILTIN_KINDS
from tests.kubeapi.selectors import field_selector, label_selector
from tests.kubeapi.status import ApiError
from wspin.core.errors import KubeAPIError
from wspin.core.kinds import CONFIGMAPS, PODS
from wspin.kube.client import Kube

_PODS = next(k for k in BUILTIN_KINDS if k.plural == "pods")


def _labelled(**labels: str) -> dict[str, object]:
    return {"metadata": {"labels": labels}}


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ("app=x", {"app": "x"}, True),
        ("app==x", {"app": "y"}, False),
        ("app!=x", {}, True),
        ("app in (x, y)", {"app": "y"}, True),
        ("app notin (x,y)", {}, True),
        ("app notin (x,y)", {"app": "x"}, False),
        ("app", {"app": ""}, True),
        ("!app", {"app": ""}, False),
        ("app=x,tier in (web),!legacy", {"app": "x", "tier": "web"}, True),
        ("", {"any": "thing"}, True),
    ],
)
def test_label_selector_operators(selector: str, labels: dict[str, str], matches: bool) -> None:
    assert label_selector(selector)(_labelled(**labels)) is matches


@pytest.mark.parametrize("selector", ["app in ()", "app=(x", "=x", "a b"])
def test_malformed_label_selector_is_bad_request(selector: str) -> None:
    with pytest.raises(ApiError) as caught:
        label_selector(selector)
    assert caught.value.code == 400


def test_field_selector_rejects_fields_the_kind_does_not_index() -> None:
    with pytest.raises(ApiError) as caught:
        field_selector("spec.containers=x", _PODS)
    assert caught.value.code == 400 and "field label not supported" in caught.value.message


async def test_list_filters_by_label_and_field_selectors(kube: Kube, namespace: str) -> None:
    for name, tier in (("a", "web"), ("b", "db"), ("c", "web")):
        await kube.create(
            CONFIGMAPS, {"metadata": {"name": name, "labels": {"tier": tier}}}, namespace
        )
    web = await kube.list(CONFIGMAPS, namespace, labels="tier in (web)")
    assert [i["metadata"]["name"] for i in web["items"]] == ["a", "c"]
    named = await kube.list(CONFIGMAPS, namespace, labels="tier=web", fields="metadata.name!=a")
    assert [i["metadata"]["name"] for i in named["items"]] == ["c"]


async def test_pods_can_be_selected_by_phase(kube: Kube, namespace: str) -> None:
    spec = {"containers": [{"name": "workspace", "image": "i"}]}
    for name in ("a", "b"):
        await kube.create(PODS, {"metadata": {"name": name}, "spec": spec}, namespace)
    await kube.patch(PODS, "b", {"status": {"phase": "Failed"}}, namespace, sub="status")
    failed = await kube.list(PODS, namespace, fields="status.phase=Failed")
    assert [i["metadata"]["name"] for i in failed["items"]] == ["b"]


async def test_unsupported_field_selector_is_400_over_http(kube: Kube, namespace: str) -> None:
    with pytest.raises(KubeAPIError) as caught:
        await kube.list(CONFIGMAPS, namespace, fields="data.k=v")
    assert caught.value.status == 400
