"""The chart's workspace-pod policies installed in an API server, then attacked as a tenant would.

Runs against the in-repo API server (which evaluates ValidatingAdmissionPolicies with CEL as
kube-apiserver v1.32 does) and unchanged against a real cluster with WSPIN_TEST_KUBECONFIG.
Each test installs the policies rendered for its own namespace, with every binding narrowed to
that namespace, so nothing else on a shared cluster is judged by them; they are deleted after.
The workspace pod is a real capture run through the real injector.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import jsonpatch
import pytest

from tests.chart.helm import PINS, parse_documents, template
from tests.fixtures import ADMISSION
from tests.kubeapi import KubeServer
from tests.support.waiting import eventually
from webhook.demo import DEMO_CONFIG
from webhook.inject import inject
from wspin.core.errors import Forbidden
from wspin.core.kinds import PODS, Resource
from wspin.kube.client import Kube

Obj = dict[str, Any]

GROUP = "admissionregistration.k8s.io"
POLICIES = Resource(GROUP, "v1", "validatingadmissionpolicies", False, "ValidatingAdmissionPolicy")
BINDINGS = Resource(
    GROUP, "v1", "validatingadmissionpolicybindings", False, "ValidatingAdmissionPolicyBinding"
)
GATE_OFF = "ImageVolume feature gate"
ATTACKER_IMAGE = "docker.io/attacker/anything:1"


def rendered_policies(namespace: str) -> list[tuple[Resource, Obj]]:
    result = template(("minimal.yaml",), PINS, namespace=namespace)
    assert result.returncode == 0, result.stderr
    found: list[tuple[Resource, Obj]] = []
    for doc in parse_documents(result.stdout):
        if "-workspace-pod-" not in doc["metadata"]["name"]:
            continue
        if doc["kind"] == "ValidatingAdmissionPolicy":
            found.append((POLICIES, doc))
        elif doc["kind"] == "ValidatingAdmissionPolicyBinding":
            doc["spec"]["matchResources"] = {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            }
            found.append((BINDINGS, doc))
    assert len(found) == 6
    return found


def workspace_pod(namespace: str, *, injected: bool = True) -> Obj:
    """The captured controller-built pod, as the injector leaves it when ``injected``."""
    pod: Obj = json.loads((ADMISSION / "pod-create-workspace.json").read_text())["request"][
        "object"
    ]
    meta = pod["metadata"]
    for key in ("ownerReferences", "managedFields", "creationTimestamp"):
        meta.pop(key, None)  # no Workspace owns it here: the garbage collector would take it
    meta["namespace"] = namespace
    pod.pop("status", None)
    for key in ("serviceAccountName", "serviceAccount"):
        pod["spec"].pop(key, None)  # the namespace's default account exists everywhere
    if injected:
        pod = jsonpatch.apply_patch(pod, list(inject(copy.deepcopy(pod), DEMO_CONFIG).patch))
    return pod


async def wait_until_enforced(kube: Kube, namespace: str) -> None:
    """A real API server takes a moment to load new policies: dry-run an unwired workspace pod
    until it is refused (the test server refuses it at once)."""
    probe = workspace_pod(namespace, injected=False)

    async def enforced() -> bool:
        try:
            await kube.create(PODS, probe, namespace, dry_run=True)
        except Forbidden:
            return True
        return False

    await eventually(enforced, "the workspace-pod policies to be enforced", timeout=60)


@pytest.fixture
async def policies(kube: Kube, namespace: str) -> AsyncIterator[None]:
    installed = rendered_policies(namespace)
    for resource, obj in installed:
        await kube.create(resource, obj)
    try:
        await wait_until_enforced(kube, namespace)
        yield
    finally:
        for resource, obj in reversed(installed):
            await kube.delete(resource, obj["metadata"]["name"])


async def create_injected(kube: Kube, namespace: str) -> Obj | None:
    """The injected workspace pod, stored; None where the API server drops image volumes (the
    gate off): the delivery policy then refuses the pod, which is the guarantee."""
    try:
        return await kube.create(PODS, workspace_pod(namespace), namespace)
    except Forbidden as refused:
        assert GATE_OFF in str(refused)
        return None


def image_of(pod: Obj, name: str) -> str:
    return str(next(c["image"] for c in pod["spec"]["containers"] if c["name"] == name))


@pytest.mark.usefixtures("policies")
async def test_an_injected_workspace_pod_is_stored_and_labels_may_change(
    kube: Kube, namespace: str
) -> None:
    pod = await create_injected(kube, namespace)
    if pod is None:
        return
    name = pod["metadata"]["name"]
    labelled = await kube.patch(PODS, name, {"metadata": {"labels": {"tier": "x"}}}, namespace)
    assert labelled["metadata"]["labels"]["tier"] == "x"


@pytest.mark.usefixtures("policies")
async def test_an_image_swap_on_an_injected_workspace_pod_is_refused(
    kube: Kube, namespace: str
) -> None:
    pod = await create_injected(kube, namespace)
    if pod is None:
        return
    name = pod["metadata"]["name"]
    index = [c["name"] for c in pod["spec"]["containers"]].index("workspace")
    swap = [{"op": "replace", "path": f"/spec/containers/{index}/image", "value": ATTACKER_IMAGE}]
    with pytest.raises(Forbidden) as refused:
        await kube.patch(PODS, name, swap, namespace, patch_type="json")
    assert "ValidatingAdmissionPolicy" in str(refused.value)
    assert "images of a workspace pod cannot change" in str(refused.value)
    stored = await kube.get(PODS, name, namespace)
    assert image_of(stored, "workspace") == image_of(pod, "workspace")


@pytest.mark.usefixtures("policies")
async def test_an_ephemeral_container_on_an_injected_workspace_pod_is_refused(
    kube: Kube, namespace: str
) -> None:
    pod = await create_injected(kube, namespace)
    if pod is None:
        return
    name = pod["metadata"]["name"]
    debugger = {
        "spec": {
            "ephemeralContainers": [
                {"name": "debugger", "image": ATTACKER_IMAGE, "targetContainerName": "workspace"}
            ]
        }
    }
    with pytest.raises(Forbidden) as refused:
        await kube.patch(PODS, name, debugger, namespace, sub="ephemeralcontainers")
    assert "ephemeral containers" in str(refused.value)
    stored = await kube.get(PODS, name, namespace)
    assert not stored["spec"].get("ephemeralContainers")


@pytest.mark.usefixtures("policies")
async def test_a_forged_receipt_on_a_stored_workspace_pod_is_refused(
    kube: Kube, namespace: str
) -> None:
    pod = await create_injected(kube, namespace)
    if pod is None:
        return
    forged = {"metadata": {"annotations": {"llmsafespaces.dev/delivery": "{}"}}}
    with pytest.raises(Forbidden) as refused:
        await kube.patch(PODS, pod["metadata"]["name"], forged, namespace)
    assert "receipt annotation" in str(refused.value)


@pytest.mark.usefixtures("policies")
async def test_a_workspace_pod_the_injector_never_saw_is_refused(
    kube: Kube, namespace: str
) -> None:
    with pytest.raises(Forbidden) as refused:
        await kube.create(PODS, workspace_pod(namespace, injected=False), namespace)
    assert "image volumes" in str(refused.value)


async def test_a_pod_stripped_of_its_image_volumes_by_the_api_server_is_refused(
    kube_server: KubeServer, kube: Kube, namespace: str
) -> None:
    installed = rendered_policies(namespace)
    for resource, obj in installed:
        await kube.create(resource, obj)
    kube_server.image_volume_gate = False  # the stored form loses the volumes, keeps the pins
    with pytest.raises(Forbidden) as refused:
        await kube.create(PODS, workspace_pod(namespace), namespace)
    message = str(refused.value)
    assert "image volumes" in message
    assert GATE_OFF in message
    assert DEMO_CONFIG.agentd.image in message
