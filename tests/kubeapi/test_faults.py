"""Test controls: injected failures, the write log and the ImageVolume-gate-off mode."""

from __future__ import annotations

import copy
from typing import Any

import aiohttp
import pytest

from tests.kubeapi import KubeServer, Write
from wspin.core.errors import KubeAPIError
from wspin.core.kinds import CONFIGMAPS, PODS
from wspin.kube.client import Kube

_DIGEST = "sha256:" + "a" * 64
_JSON = {"Content-Type": "application/json"}


def _pod_with_image_volumes() -> dict[str, Any]:
    mount = {"name": "agentd", "mountPath": "/agentd", "readOnly": True}
    return {
        "metadata": {"name": "ws1-pod"},
        "spec": {
            # Named, as admission would default it: the spec compares whole.
            "serviceAccountName": "default",
            "initContainers": [
                {"name": "agentd", "image": "i", "restartPolicy": "Always", "volumeMounts": [mount]}
            ],
            "containers": [
                {
                    "name": "workspace",
                    "image": "i",
                    "env": [{"name": "AGENTD_IMAGE_VOLUME", "value": "1"}],
                    "volumeMounts": [
                        {"name": "workspace", "mountPath": "/workspace"},
                        mount,
                        {"name": "opencode", "mountPath": "/opencode", "readOnly": True},
                    ],
                }
            ],
            "volumes": [
                {"name": "workspace", "emptyDir": {}},
                {"name": "agentd", "image": {"reference": f"r/agentd@{_DIGEST}"}},
                {"name": "opencode", "image": {"reference": f"r/opencode@{_DIGEST}"}},
            ],
        },
    }


async def test_injected_failure_answers_a_status_and_changes_nothing(
    kube_server: KubeServer, kube: Kube, namespace: str
) -> None:
    kube_server.fail_next(503, method="POST", path=f"/api/v1/namespaces/{namespace}/configmaps")
    with pytest.raises(KubeAPIError) as caught:
        await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)
    assert (caught.value.status, caught.value.reason) == (503, "ServiceUnavailable")
    assert await kube.get_or_none(CONFIGMAPS, "a", namespace) is None
    await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)


async def test_injected_failures_count_down_and_match_only_their_method(
    kube_server: KubeServer, kube: Kube, namespace: str
) -> None:
    await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)
    kube_server.fail_next(500, method="PATCH", count=2)
    assert await kube.get(CONFIGMAPS, "a", namespace)
    for _ in range(2):
        with pytest.raises(KubeAPIError):
            await kube.patch(CONFIGMAPS, "a", {"data": {"k": "v"}}, namespace)
    patched = await kube.patch(CONFIGMAPS, "a", {"data": {"k": "v"}}, namespace)
    assert patched["data"] == {"k": "v"}


async def test_an_exact_fault_spares_the_objects_subresources(
    kube_server: KubeServer, kube: Kube, namespace: str
) -> None:
    await kube.create(
        PODS,
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        namespace,
    )
    path = f"/api/v1/namespaces/{namespace}/pods/p"
    kube_server.fail_next(500, method="PATCH", path=path, exact=True)
    status = await kube.patch(PODS, "p", {"status": {"phase": "Running"}}, namespace, sub="status")
    assert status["status"]["phase"] == "Running"
    with pytest.raises(KubeAPIError):
        await kube.patch(PODS, "p", {"metadata": {"labels": {"a": "b"}}}, namespace)


async def test_write_log_records_every_write_and_no_read(
    kube_server: KubeServer, kube: Kube, namespace: str
) -> None:
    kube_server.writes.clear()
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)
    await kube.get(CONFIGMAPS, "a", namespace)
    await kube.list(CONFIGMAPS, namespace)
    await kube.patch(CONFIGMAPS, "a", {"data": {"k": "v"}}, namespace)
    await kube.delete(CONFIGMAPS, "a", namespace)
    assert kube_server.writes == [
        Write("POST", path),
        Write("PATCH", f"{path}/a"),
        Write("DELETE", f"{path}/a"),
    ]


async def test_image_volumes_are_kept_with_the_gate_on(
    kube_server: KubeServer, kube: Kube, namespace: str
) -> None:
    stored = await kube.create(PODS, _pod_with_image_volumes(), namespace)
    assert stored["spec"] == _pod_with_image_volumes()["spec"]


@pytest.mark.parametrize("dry_run", [False, True])
async def test_gate_off_drops_image_volumes_and_their_mounts_but_keeps_env(
    kube_server: KubeServer, kube: Kube, namespace: str, dry_run: bool
) -> None:
    kube_server.image_volume_gate = False
    sent = _pod_with_image_volumes()
    stored = await kube.create(PODS, copy.deepcopy(sent), namespace, dry_run=dry_run)
    spec = stored["spec"]
    assert spec["volumes"] == [{"name": "workspace", "emptyDir": {}}]
    assert "volumeMounts" not in spec["initContainers"][0]
    workspace = spec["containers"][0]
    assert workspace["volumeMounts"] == [{"name": "workspace", "mountPath": "/workspace"}]
    assert workspace["env"] == sent["spec"]["containers"][0]["env"]
    assert (await kube.get_or_none(PODS, "ws1-pod", namespace) is None) is dry_run


async def test_bad_requests_get_a_status_body_naming_the_problem(kube_server: KubeServer) -> None:
    url = f"{kube_server.url}/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession() as session:
        async with session.post(url, data=b"{not json", headers=_JSON) as bad_json:
            body = await bad_json.json()
            assert (bad_json.status, body["reason"]) == (400, "BadRequest")
            assert "not valid JSON" in body["message"]
        async with session.get(f"{kube_server.url}/api/v1/widgets") as unknown:
            body = await unknown.json()
            assert (unknown.status, body["kind"], body["reason"]) == (404, "Status", "NotFound")
        async with session.put(url, data=b"{}", headers=_JSON) as wrong_method:
            assert wrong_method.status == 405
            assert (await wrong_method.json())["reason"] == "MethodNotAllowed"


async def test_a_policy_denial_refuses_a_dry_run_create_with_the_api_servers_status(
    kube_server: KubeServer,
) -> None:
    from tests.kubeapi.admission import Denial

    kube_server.deny_creates(
        Denial("policy", "p1", "no thanks", path="/api/v1/namespaces/ns/pods", count=1)
    )
    body = {"metadata": {"generateName": "probe-"}, "spec": {"containers": []}}
    async with aiohttp.ClientSession() as session:
        url = f"{kube_server.url}/api/v1/namespaces/ns/pods?dryRun=All"
        async with session.post(url, json=body) as refused:
            status = await refused.json()
        assert refused.status == 422
        assert status["reason"] == "Invalid"
        name = status["details"]["name"]
        assert name.startswith("probe-") and len(name) == len("probe-") + 5
        cause = "ValidatingAdmissionPolicy 'p1' with binding 'p1' denied request: no thanks"
        assert status["message"] == f'pods "{name}" is forbidden: {cause}'
        assert status["details"]["causes"] == [{"message": cause}]
        async with session.post(url, json=body) as admitted:  # count used up
            assert admitted.status != 422
