"""Create, read, update and delete as a client sees them, through both client surfaces.

These tests use only ``kube``/``kube_api``/``namespace``, so they also hold against a real
cluster: that is what keeps the test server honest.
"""

from __future__ import annotations

import asyncio
import copy
import json

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.support.workspaces import SPEC_DEFAULTS
from wspin.core.errors import AlreadyExists, Conflict, Invalid, NotFound
from wspin.core.kinds import CONFIGMAPS, PODS, SECRETS, WORKSPACES
from wspin.kube.client import Kube


def _pod(name: str, **labels: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "workspace", "image": "busybox:1.36"}]},
    }


async def test_create_sets_uid_resource_version_and_creation_timestamp(
    kube: Kube, namespace: str
) -> None:
    created = await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)
    meta = created["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"]
    assert meta["namespace"] == namespace
    assert (await kube.get(CONFIGMAPS, "a", namespace))["metadata"] == meta


async def test_generate_name_gets_a_random_suffix(kube: Kube, namespace: str) -> None:
    body = {"metadata": {"generateName": "ws-"}}
    first = await kube.create(CONFIGMAPS, body, namespace)
    second = await kube.create(CONFIGMAPS, body, namespace)
    names = {first["metadata"]["name"], second["metadata"]["name"]}
    assert len(names) == 2
    assert all(n.startswith("ws-") and len(n) == len("ws-") + 5 for n in names)


async def test_creating_a_taken_name_is_already_exists_not_conflict(
    kube: Kube, namespace: str
) -> None:
    await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)
    with pytest.raises(AlreadyExists) as caught:
        await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)
    assert caught.value.reason == "AlreadyExists"


async def test_missing_namespace_and_object_are_404_with_a_status_body(
    kube_api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    with pytest.raises(ApiException) as missing_ns:
        await core.create_namespaced_config_map(
            "no-such-namespace", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a"))
        )
    with pytest.raises(ApiException) as missing_obj:
        await core.read_namespaced_config_map("nope", namespace)
    for caught, name in ((missing_ns, "no-such-namespace"), (missing_obj, "nope")):
        status = json.loads(caught.value.body or "{}")
        assert caught.value.status == 404
        assert (status["kind"], status["reason"], status["code"]) == ("Status", "NotFound", 404)
        assert name in status["message"]


async def test_dry_run_create_returns_the_object_and_stores_nothing(
    kube: Kube, namespace: str
) -> None:
    preview = await kube.create(
        CONFIGMAPS, {"metadata": {"name": "a"}, "data": {"k": "v"}}, namespace, dry_run=True
    )
    assert preview["data"] == {"k": "v"} and preview["metadata"]["uid"]
    assert await kube.get_or_none(CONFIGMAPS, "a", namespace) is None


async def test_update_with_stale_resource_version_is_conflict(kube: Kube, namespace: str) -> None:
    first = await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)
    await kube.replace(CONFIGMAPS, {**first, "data": {"k": "1"}})
    with pytest.raises(Conflict) as caught:
        await kube.replace(CONFIGMAPS, {**first, "data": {"k": "2"}})
    assert caught.value.reason == "Conflict"
    assert (await kube.get(CONFIGMAPS, "a", namespace))["data"] == {"k": "1"}


async def test_patch_with_stale_resource_version_is_conflict(kube: Kube, namespace: str) -> None:
    first = await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)
    await kube.patch(CONFIGMAPS, "a", {"data": {"k": "1"}}, namespace)
    stale = {"metadata": {"resourceVersion": first["metadata"]["resourceVersion"]}}
    with pytest.raises(Conflict):
        await kube.patch(CONFIGMAPS, "a", {**stale, "data": {"k": "2"}}, namespace)


async def test_no_op_writes_keep_the_resource_version(kube: Kube, namespace: str) -> None:
    first = await kube.create(
        CONFIGMAPS, {"metadata": {"name": "a"}, "data": {"k": "v"}}, namespace
    )
    rv = first["metadata"]["resourceVersion"]
    replaced = await kube.replace(CONFIGMAPS, first)
    patched = await kube.patch(CONFIGMAPS, "a", {"data": {"k": "v"}}, namespace)
    assert replaced["metadata"]["resourceVersion"] == rv
    assert patched["metadata"]["resourceVersion"] == rv


async def test_custom_resource_generation_bumps_on_spec_change_only(
    kube: Kube, namespace: str
) -> None:
    ws = await kube.create(WORKSPACES, {"metadata": {"name": "w"}, "spec": {"a": 1}}, namespace)
    assert ws["metadata"]["generation"] == 1
    labelled = await kube.patch(WORKSPACES, "w", {"metadata": {"labels": {"x": "y"}}}, namespace)
    assert labelled["metadata"]["generation"] == 1
    changed = await kube.patch(WORKSPACES, "w", {"spec": {"a": 2}}, namespace)
    assert changed["metadata"]["generation"] == 2
    status = await kube.patch(
        WORKSPACES, "w", {"status": {"phase": "Active"}}, namespace, sub="status"
    )
    assert status["metadata"]["generation"] == 2


async def test_custom_resource_put_without_resource_version_is_invalid(
    kube: Kube, namespace: str
) -> None:
    await kube.create(WORKSPACES, {"metadata": {"name": "w"}, "spec": {}}, namespace)
    body = {"metadata": {"name": "w", "namespace": namespace}, "spec": {"a": 1}}
    with pytest.raises(Invalid):
        await kube.replace(WORKSPACES, body)


async def test_status_subresource_isolates_status_from_the_main_endpoint(
    kube: Kube, namespace: str
) -> None:
    ws = await kube.create(
        WORKSPACES,
        {"metadata": {"name": "w"}, "spec": {"a": 1}, "status": {"phase": "Forged"}},
        namespace,
    )
    assert "status" not in ws
    ws = await kube.replace(WORKSPACES, {**ws, "spec": {"a": 2}, "status": {"phase": "Main"}})
    # The CRD's schema defaults spec fields, as a real API server does: architecture, and the
    # nested defaults inside the autoSuspend object it defaults to {}.
    assert ws["spec"] == {"a": 2, **SPEC_DEFAULTS} and "status" not in ws
    ws = await kube.replace(
        WORKSPACES, {**ws, "spec": {"a": 3}, "status": {"phase": "Active"}}, sub="status"
    )
    assert ws["spec"] == {"a": 2, **SPEC_DEFAULTS} and ws["status"] == {"phase": "Active"}


async def test_pod_status_is_written_only_through_pods_status(kube: Kube, namespace: str) -> None:
    pod = await kube.create(PODS, _pod("p"), namespace)
    assert pod["status"]["phase"] == "Pending"
    ignored = await kube.patch(PODS, "p", {"status": {"phase": "Failed"}}, namespace)
    assert ignored["status"]["phase"] == "Pending"
    exited = {
        "containerStatuses": [{"name": "workspace", "state": {"terminated": {"exitCode": 81}}}]
    }
    done = await kube.patch(
        PODS, "p", {"status": {"phase": "Failed", **exited}}, namespace, sub="status"
    )
    assert done["status"]["phase"] == "Failed"
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 81


async def test_pod_spec_changes_beyond_images_are_invalid(kube: Kube, namespace: str) -> None:
    await kube.create(PODS, _pod("p"), namespace)
    with pytest.raises(Invalid):
        await kube.patch(
            PODS,
            "p",
            [{"op": "add", "path": "/spec/volumes", "value": [{"name": "v", "emptyDir": {}}]}],
            namespace,
            patch_type="json",
        )


async def test_secret_string_data_is_folded_into_base64_data(kube: Kube, namespace: str) -> None:
    secret = await kube.create(
        SECRETS, {"metadata": {"name": "s"}, "stringData": {"token": "abc"}}, namespace
    )
    assert secret["data"] == {"token": "YWJj"} and "stringData" not in secret
    assert secret["type"] == "Opaque"


async def test_a_secret_is_replaced_whole_without_a_resource_version(
    kube: Kube, namespace: str
) -> None:
    await kube.create(
        SECRETS,
        {"metadata": {"name": "s", "labels": {"a": "b"}}, "data": {"old": "eA=="}},
        namespace,
    )
    body = {"metadata": {"name": "s", "namespace": namespace}, "stringData": {"new": "abc"}}
    replaced = await kube.replace(SECRETS, body)
    assert replaced["data"] == {"new": "YWJj"} and "labels" not in replaced["metadata"]


async def test_a_secret_keeps_its_type(kube: Kube, namespace: str) -> None:
    tls = {
        "metadata": {"name": "t"},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": "", "tls.key": ""},
    }
    await kube.create(SECRETS, tls, namespace)
    body = {"metadata": {"name": "t", "namespace": namespace}, "type": "Opaque", "data": {}}
    with pytest.raises(Invalid, match=r'type: Invalid value: "Opaque": field is immutable'):
        await kube.replace(SECRETS, body)
    untyped = {"metadata": {"name": "t", "namespace": namespace}, "data": {}}
    with pytest.raises(Invalid, match="field is immutable"):
        await kube.replace(SECRETS, untyped)


async def test_an_immutable_secret_keeps_its_data_and_its_mark(kube: Kube, namespace: str) -> None:
    await kube.create(
        SECRETS, {"metadata": {"name": "i"}, "immutable": True, "data": {"k": "eA=="}}, namespace
    )
    changed = {"metadata": {"name": "i", "namespace": namespace}, "immutable": True, "data": {}}
    with pytest.raises(
        Invalid, match="data: Forbidden: field is immutable when `immutable` is set"
    ):
        await kube.replace(SECRETS, changed)
    unmarked = {"metadata": {"name": "i", "namespace": namespace}, "data": {"k": "eA=="}}
    with pytest.raises(Invalid, match="immutable: Forbidden"):
        await kube.replace(SECRETS, unmarked)


async def test_generated_client_round_trips_typed_objects(
    kube_api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="a", labels={"app": "x"}), data={"k": "v"}
    )
    created = await core.create_namespaced_config_map(namespace, body)
    created.data["k"] = "w"
    replaced = await core.replace_namespaced_config_map("a", namespace, created)
    assert replaced.metadata.resource_version != created.metadata.resource_version
    listed = await core.list_namespaced_config_map(namespace, label_selector="app=x")
    assert [c.metadata.name for c in listed.items] == ["a"]
    deleted = await core.delete_namespaced_config_map("a", namespace)
    assert deleted.status == "Success"
    with pytest.raises(ApiException) as caught:
        await core.read_namespaced_config_map("a", namespace)
    assert caught.value.status == 404


async def test_lease_update_cycle_works_for_leader_election(
    kube_api: client.ApiClient, namespace: str
) -> None:
    leases = client.CoordinationV1Api(kube_api)
    lease = client.V1Lease(
        metadata=client.V1ObjectMeta(name="wspin-controller"),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15),
    )
    created = await leases.create_namespaced_lease(namespace, lease)
    created.spec.holder_identity = "b"
    renewed = await leases.replace_namespaced_lease("wspin-controller", namespace, created)
    assert renewed.spec.holder_identity == "b"
    created.spec.holder_identity = "c"
    with pytest.raises(ApiException) as caught:
        await leases.replace_namespaced_lease("wspin-controller", namespace, created)
    assert caught.value.status == 409


async def test_missing_object_delete_is_not_found(kube: Kube, namespace: str) -> None:
    with pytest.raises(NotFound):
        await kube.delete(CONFIGMAPS, "nope", namespace, missing_ok=False)


async def test_dry_run_patch_returns_the_result_and_stores_nothing(
    kube: Kube, namespace: str
) -> None:
    await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}, "data": {"k": "v"}}, namespace)
    preview = await kube.request(
        "PATCH",
        CONFIGMAPS.path(namespace, "a"),
        query={"dryRun": "All"},
        body={"data": {"k": "w"}},
        content_type="application/merge-patch+json",
    )
    assert preview["data"] == {"k": "w"}
    assert (await kube.get(CONFIGMAPS, "a", namespace))["data"] == {"k": "v"}


async def test_list_pages_with_limit_and_continue(
    kube_api: client.ApiClient, namespace: str
) -> None:
    # Secrets: a namespace on a real cluster also holds the cluster's ConfigMap, not a Secret.
    core = client.CoreV1Api(kube_api)
    for name in ("a", "b", "c"):
        meta = client.V1ObjectMeta(name=name)
        await core.create_namespaced_secret(namespace, client.V1Secret(metadata=meta))
    first = await core.list_namespaced_secret(namespace, limit=2)
    rest = await core.list_namespaced_secret(namespace, limit=2, _continue=first.metadata._continue)
    assert [c.metadata.name for c in first.items + rest.items] == ["a", "b", "c"]
    assert rest.metadata._continue is None


async def test_pods_are_listed_across_namespaces_and_deleted_as_a_collection(
    kube_api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    for name in ("a", "b"):
        await core.create_namespaced_pod(
            namespace,
            client.V1Pod(
                metadata=client.V1ObjectMeta(name=name, labels={"app": "llmsafespaces"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="workspace", image="i")]),
            ),
        )
    everywhere = await core.list_pod_for_all_namespaces(label_selector="app=llmsafespaces")
    assert {(p.metadata.namespace, p.metadata.name) for p in everywhere.items} >= {
        (namespace, "a"),
        (namespace, "b"),
    }
    await core.delete_collection_namespaced_pod(
        namespace, label_selector="app=llmsafespaces", grace_period_seconds=0
    )
    for _ in range(100):
        if not (await core.list_namespaced_pod(namespace)).items:
            break
        await asyncio.sleep(0.05)
    assert (await core.list_namespaced_pod(namespace)).items == []


async def test_pod_status_writes_apply_labels_and_annotations_but_keep_spec_and_owners(
    kube: Kube, namespace: str
) -> None:
    """kube-apiserver v1.32's pod status strategy resets only the spec and ownerReferences:
    label and annotation changes made through ``pods/status`` are stored."""
    owner = await kube.create(CONFIGMAPS, {"metadata": {"name": "owner"}}, namespace)
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    body = _pod("p", app="x", tier="a")
    body["metadata"]["ownerReferences"] = [reference]  # type: ignore[index]
    pod = await kube.create(PODS, body, namespace)
    forged = copy.deepcopy(pod)
    forged["metadata"]["labels"] = {"tier": "b"}
    forged["metadata"]["annotations"] = {"note": "via-status"}
    forged["metadata"]["ownerReferences"] = []
    forged["spec"]["containers"][0]["image"] = "attacker/image:1"
    stored = await kube.replace(PODS, forged, sub="status")
    assert stored["metadata"]["labels"] == {"tier": "b"}
    assert stored["metadata"]["annotations"] == {"note": "via-status"}
    assert stored["metadata"]["ownerReferences"] == [reference]
    assert stored["spec"]["containers"][0]["image"] == "busybox:1.36"
    patched = await kube.patch(
        PODS, "p", {"metadata": {"labels": {"app": None}}}, namespace, sub="status"
    )
    assert "app" not in patched["metadata"]["labels"]


async def test_custom_resource_status_writes_keep_the_metadata(kube: Kube, namespace: str) -> None:
    await kube.create(WORKSPACES, {"metadata": {"name": "w", "labels": {"a": "1"}}}, namespace)
    stored = await kube.patch(
        WORKSPACES,
        "w",
        {"metadata": {"labels": {"a": "2"}}, "status": {"phase": "Active"}},
        namespace,
        sub="status",
    )
    assert stored["metadata"]["labels"] == {"a": "1"}
    assert stored["status"] == {"phase": "Active"}


async def test_a_binding_assigns_the_node_once_and_copies_its_annotations(
    kube: Kube, namespace: str
) -> None:
    unscheduled = _pod("p")
    unscheduled["spec"]["schedulerName"] = "wspin-test-nobody"  # type: ignore[index]
    await kube.create(PODS, unscheduled, namespace)
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "annotations": {"scheduled-by": "test"}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    await kube.request("POST", PODS.path(namespace, "p", "binding"), body=binding)
    pod = await kube.get(PODS, "p", namespace)
    assert pod["spec"]["nodeName"] == "node-1"
    assert pod["metadata"]["annotations"]["scheduled-by"] == "test"
    with pytest.raises(Conflict):
        await kube.request("POST", PODS.path(namespace, "p", "binding"), body=binding)


@pytest.mark.parametrize(
    ("labels", "problem"),
    [
        ({"app": "x" * 64}, "must be no more than 63 characters"),
        ({"app": "-edge"}, "a valid label must be an empty string"),
        ({"app": "a/b"}, "a valid label must be an empty string"),
        ({"x" * 64: "v"}, "name part must be no more than 63 characters"),
        ({"-key": "v"}, "name part must consist of alphanumeric characters"),
        ({"Bad_Prefix.example/name": "v"}, "prefix part a lowercase RFC 1123 subdomain"),
    ],
)
async def test_labels_are_validated_on_every_write(
    kube: Kube, namespace: str, labels: dict[str, str], problem: str
) -> None:
    body = {"metadata": {"name": "labelled", "labels": labels}, "data": {}}
    with pytest.raises(Invalid, match=r"metadata\.labels") as created:
        await kube.create(CONFIGMAPS, body, namespace)
    assert problem in str(created.value)
    await kube.create(CONFIGMAPS, {"metadata": {"name": "labelled"}}, namespace)
    with pytest.raises(Invalid, match=r"metadata\.labels"):
        await kube.patch(CONFIGMAPS, "labelled", {"metadata": {"labels": labels}}, namespace)
    longest = {"llmsafespaces.dev/" + "k" * 63: "v" * 63, "empty": ""}
    patched = await kube.patch(CONFIGMAPS, "labelled", {"metadata": {"labels": longest}}, namespace)
    assert patched["metadata"]["labels"] == longest
