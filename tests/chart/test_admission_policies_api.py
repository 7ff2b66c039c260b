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

import jsonpatch
import pytest

from tests.chart.helm import PINS, parse_documents, template
from tests.fixtures import ADMISSION
from tests.kubeapi import KubeServer
from tests.support.feature_gates import image_volume_gate_of
from tests.support.policy_resources import BINDINGS, POLICIES
from tests.support.waiting import eventually
from webhook.demo import DEMO_CONFIG
from webhook.inject import inject
from wspin.core.errors import Forbidden
from wspin.core.kinds import PODS, Resource
from wspin.core.objects import Obj
from wspin.kube.client import Kube

pytestmark = pytest.mark.image_volume_gate  # each test holds with the gate on and off

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
    assert len(found) == 8
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
    gate off, as the server reports it): the delivery policy then refuses the pod, which is
    the guarantee."""
    try:
        stored = await kube.create(PODS, workspace_pod(namespace), namespace)
    except Forbidden as refused:
        assert GATE_OFF in str(refused)
        assert not await image_volume_gate_of(kube), (
            "refused as gate-off by a server whose gate is on"
        )
        return None
    assert await image_volume_gate_of(kube), "stored by a server whose gate is off"
    return stored


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


@pytest.mark.usefixtures("policies")
@pytest.mark.parametrize(
    "labels",
    [{"app": None}, {"component": "debug"}, {"llmsafespaces.dev/tenant": "someone-else"}],
)
async def test_a_label_change_through_pods_status_is_refused(
    kube: Kube, namespace: str, labels: dict[str, str | None]
) -> None:
    """A v1.32 API server applies label changes made through pods/status: without the policy
    a tenant could take the pod out of the selector, swap its image and put the label back."""
    pod = await create_injected(kube, namespace)
    if pod is None:
        return
    name = pod["metadata"]["name"]
    with pytest.raises(Forbidden) as refused:
        await kube.patch(PODS, name, {"metadata": {"labels": labels}}, namespace, sub="status")
    assert "labels app, component and llmsafespaces.dev/*" in str(refused.value)
    stored = await kube.get(PODS, name, namespace)
    assert stored["metadata"]["labels"] == pod["metadata"]["labels"]


@pytest.mark.usefixtures("policies")
async def test_a_forged_receipt_through_pods_status_is_refused(kube: Kube, namespace: str) -> None:
    pod = await create_injected(kube, namespace)
    if pod is None:
        return
    forged = {"metadata": {"annotations": {"llmsafespaces.dev/delivery": "{}"}}}
    with pytest.raises(Forbidden):
        await kube.patch(PODS, pod["metadata"]["name"], forged, namespace, sub="status")


def copied_wiring(namespace: str) -> Obj:
    """What a tenant can write without the webhook: the injected pod copied whole (receipt,
    volumes, pins), with no injector in the path."""
    return workspace_pod(namespace)


@pytest.mark.usefixtures("policies")
async def test_a_copied_pod_that_shadows_the_binaries_is_refused_by_the_policies_alone(
    kube: Kube, namespace: str
) -> None:
    pod = copied_wiring(namespace)
    pod["spec"]["volumes"].append({"name": "overlay", "emptyDir": {}})
    main = next(c for c in pod["spec"]["containers"] if c["name"] == "workspace")
    main["volumeMounts"].append({"name": "overlay", "mountPath": "/agentd/usr/local/bin"})
    with pytest.raises(Forbidden) as refused:
        await kube.create(PODS, pod, namespace)
    assert "shadow the pinned binaries" in str(refused.value) or GATE_OFF in str(refused.value)


@pytest.mark.usefixtures("policies")
async def test_a_copied_pod_that_runs_a_shell_is_refused_by_the_policies_alone(
    kube: Kube, namespace: str
) -> None:
    pod = copied_wiring(namespace)
    main = next(c for c in pod["spec"]["containers"] if c["name"] == "workspace")
    main["image"] = "docker.io/library/busybox:1.36"
    main["command"], main["args"] = ["sh"], ["-c", "sleep infinity"]
    with pytest.raises(Forbidden) as refused:
        await kube.create(PODS, pod, namespace)
    assert "runs the delivered agentd" in str(refused.value) or GATE_OFF in str(refused.value)


@pytest.mark.usefixtures("policies")
async def test_a_binding_that_plants_a_receipt_is_refused(kube: Kube, namespace: str) -> None:
    pod = workspace_pod(namespace)
    pod["spec"]["schedulerName"] = "wspin-test-nobody"  # no scheduler binds it first
    try:
        stored = await kube.create(PODS, pod, namespace)
    except Forbidden as gate_off:
        assert GATE_OFF in str(gate_off)
        return
    name = stored["metadata"]["name"]
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {
            "name": name,
            "annotations": {"llmsafespaces.dev/delivery": '{"agentd":"sha256:00"}'},
        },
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    with pytest.raises(Forbidden) as refused:
        await kube.request("POST", PODS.path(namespace, name, "binding"), body=binding)
    assert "Binding may not carry" in str(refused.value)
    after = await kube.get(PODS, name, namespace)
    assert after["metadata"]["annotations"] == stored["metadata"]["annotations"]
