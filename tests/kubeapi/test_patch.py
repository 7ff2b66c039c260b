"""The three patch flavours, chosen by Content-Type, as kube-apiserver applies them."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubeapi.patch import merge_patch, strategic_merge_patch
from tests.support.workspaces import SPEC_DEFAULTS
from wspin.core.errors import Invalid, KubeAPIError
from wspin.core.kinds import CONFIGMAPS, PODS, WORKSPACES
from wspin.kube.client import Kube

#: The generated client picks JSON patch for a dict body unless told otherwise.
_MERGE_PATCH: dict[str, Any] = {"_content_type": "application/merge-patch+json"}
#: CustomObjectsApi sends the body as it is: a custom resource must name its own kind.
_WORKSPACE: dict[str, Any] = {
    "apiVersion": "llmsafespaces.dev/v1",
    "kind": "Workspace",
    "metadata": {"name": "w"},
    "spec": {},
}


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": 1, "b": 2}, {"b": None}, {"a": 1}),
        ({"a": {"x": 1}}, {"a": {"y": 2}}, {"a": {"x": 1, "y": 2}}),
        ({"l": [1, 2]}, {"l": [3]}, {"l": [3]}),
        ({"a": 1}, {"a": {"b": None}}, {"a": {}}),
    ],
)
def test_merge_patch_follows_rfc_7386(target: Any, patch: Any, expected: Any) -> None:
    assert merge_patch(target, patch) == expected


def test_strategic_merge_merges_containers_by_name_and_mounts_by_path() -> None:
    spec = {
        "containers": [
            {"name": "workspace", "image": "a", "volumeMounts": [{"name": "v", "mountPath": "/v"}]},
            {"name": "agentd", "image": "b"},
        ]
    }
    patch = {
        "containers": [
            {"name": "workspace", "volumeMounts": [{"name": "agentd", "mountPath": "/agentd"}]},
            {"name": "agentd", "$patch": "delete"},
        ],
        "$setElementOrder/containers": [{"name": "workspace"}],
    }
    merged = strategic_merge_patch(spec, patch)
    assert merged == {
        "containers": [
            {
                "name": "workspace",
                "image": "a",
                "volumeMounts": [
                    {"name": "v", "mountPath": "/v"},
                    {"name": "agentd", "mountPath": "/agentd"},
                ],
            }
        ]
    }


def test_strategic_merge_treats_finalizers_as_a_set() -> None:
    meta = {"finalizers": ["a", "b"]}
    assert strategic_merge_patch(meta, {"finalizers": ["b", "c"]}) == {
        "finalizers": ["a", "b", "c"]
    }


async def test_strategic_merge_patch_merges_pod_labels_and_env(kube: Kube, namespace: str) -> None:
    container = {"name": "workspace", "image": "i", "env": [{"name": "A", "value": "1"}]}
    pod = {"metadata": {"name": "p", "labels": {"a": "1"}}, "spec": {"containers": [container]}}
    await kube.create(PODS, pod, namespace)
    patched = await kube.patch(
        PODS,
        "p",
        {
            "metadata": {"labels": {"b": "2"}},
            "spec": {"containers": [{"name": "workspace", "image": "j"}]},
        },
        namespace,
        patch_type="strategic",
    )
    assert patched["metadata"]["labels"] == {"a": "1", "b": "2"}
    # Merged by name into the one container: the image replaced, the env kept (a real
    # server also fills in the container's defaults, which this does not judge).
    (merged,) = patched["spec"]["containers"]
    assert {k: merged.get(k) for k in container} == {**container, "image": "j"}


async def test_strategic_merge_on_a_custom_resource_is_415(kube: Kube, namespace: str) -> None:
    await kube.create(WORKSPACES, {"metadata": {"name": "w"}, "spec": {}}, namespace)
    with pytest.raises(KubeAPIError) as caught:
        await kube.patch(WORKSPACES, "w", {"spec": {"a": 1}}, namespace, patch_type="strategic")
    assert caught.value.status == 415


async def test_json_patch_applies_and_a_failed_test_op_is_invalid(
    kube: Kube, namespace: str
) -> None:
    await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}, "data": {"k": "v"}}, namespace)
    ops = [
        {"op": "test", "path": "/data/k", "value": "v"},
        {"op": "replace", "path": "/data/k", "value": "w"},
    ]
    patched = await kube.patch(CONFIGMAPS, "a", ops, namespace, patch_type="json")
    assert patched["data"] == {"k": "w"}
    with pytest.raises(Invalid):
        await kube.patch(CONFIGMAPS, "a", ops, namespace, patch_type="json")


async def test_custom_objects_api_sends_a_dict_as_json_patch_unless_told(
    kube_api: client.ApiClient, namespace: str
) -> None:
    custom = client.CustomObjectsApi(kube_api)
    await custom.create_namespaced_custom_object(
        "llmsafespaces.dev", "v1", namespace, "workspaces", _WORKSPACE
    )
    args = ("llmsafespaces.dev", "v1", namespace, "workspaces", "w", {"spec": {"a": 1}})
    with pytest.raises(ApiException) as caught:
        await custom.patch_namespaced_custom_object(*args)
    assert caught.value.status == 400
    patched = await custom.patch_namespaced_custom_object(*args, **_MERGE_PATCH)
    assert patched["spec"] == {"a": 1, **SPEC_DEFAULTS}  # defaulted by the schema


async def test_status_patch_through_custom_objects_api_changes_only_status(
    kube_api: client.ApiClient, namespace: str
) -> None:
    custom = client.CustomObjectsApi(kube_api)
    await custom.create_namespaced_custom_object(
        "llmsafespaces.dev", "v1", namespace, "workspaces", _WORKSPACE
    )
    patched = await custom.patch_namespaced_custom_object_status(
        "llmsafespaces.dev",
        "v1",
        namespace,
        "workspaces",
        "w",
        {"spec": {"a": 1}, "status": {"phase": "Active"}},
        **_MERGE_PATCH,
    )
    assert patched["status"] == {"phase": "Active"}
    assert patched["spec"] == SPEC_DEFAULTS  # the schema's defaults, no "a"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"metadata": {"name": "w"}, "spec": {}}, "Object 'Kind' is missing"),
        (
            {"kind": "Workspace", "metadata": {"name": "w"}, "spec": {}},
            "does not match the expected API version (llmsafespaces.dev/v1)",
        ),
    ],
)
async def test_a_custom_resource_body_must_name_its_kind_and_api_version(
    kube_api: client.ApiClient, namespace: str, body: dict[str, Any], words: str
) -> None:
    """Unlike a built-in kind's, a custom resource's body gets no kind from the URL."""
    custom = client.CustomObjectsApi(kube_api)
    with pytest.raises(ApiException) as caught:
        await custom.create_namespaced_custom_object(
            "llmsafespaces.dev", "v1", namespace, "workspaces", body
        )
    assert caught.value.status == 400
    assert words in str(caught.value.body)
