"""The chart's ValidatingAdmissionPolicies, their CEL evaluated against real API-server captures.

The chart is rendered with the release the captures were made with (webhook/demo.py's
DEMO_CONFIG); the injected pod is the capture run through the real injector, and the stripped
pod is that pod after the ImageVolume-gate-off strategy (image volumes and their mounts gone,
env pins kept), exactly as the captures' README records a v1.32 API server storing it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.chart.helm import PINS, Rendered, render
from tests.chart.pod_policies import (
    DEBUG,
    DELIVERY,
    INTEGRITY,
    capture,
    check,
    container,
    injected,
    stored,
    updated,
)
from tests.kubeapi.defaults import drop_image_volumes
from webhook.demo import DEMO_CONFIG
from wspin.core.objects import Obj
from wspin.core.workspace_pod import DELIVERY_ENV_NAMES, SELECTOR_LABELS


@pytest.fixture(scope="module")
def registry_pins() -> Rendered:
    """Per-arch pins left to the registry: the policy checks their shape, not their value."""
    return render(("minimal.yaml",), {k: v for k, v in PINS.items() if k.endswith(".image")})


def stripped(request: Obj) -> Obj:
    """The gate-off stored form: image volumes and their mounts dropped, the env pins kept."""
    request = copy.deepcopy(request)
    drop_image_volumes(request["object"]["spec"])
    return request


# -- the policies select what the code calls a workspace pod ---------------------------------


def test_every_policy_selects_workspace_pods_by_the_shared_definition(pinned: Rendered) -> None:
    names = {p["metadata"]["name"] for p in pinned.of_kind("ValidatingAdmissionPolicy")}
    assert names >= {DELIVERY, INTEGRITY, DEBUG}
    for policy in (
        pinned.get("ValidatingAdmissionPolicy", n) for n in (DELIVERY, INTEGRITY, DEBUG)
    ):
        selector = policy["spec"]["matchConstraints"]["objectSelector"]
        assert selector == {"matchLabels": dict(SELECTOR_LABELS)}
        assert policy["spec"]["failurePolicy"] == "Fail"
        assert "namespaceSelector" not in policy["spec"]["matchConstraints"]
    for binding in pinned.of_kind("ValidatingAdmissionPolicyBinding"):
        if binding["spec"]["policyName"] in (DELIVERY, INTEGRITY, DEBUG):
            assert binding["spec"]["validationActions"] == ["Deny"]


def test_the_pin_names_in_the_policy_are_the_injectors(pinned: Rendered) -> None:
    policy = pinned.get("ValidatingAdmissionPolicy", INTEGRITY)
    (pins,) = [v for v in policy["spec"]["variables"] if v["name"] == "pins"]
    assert json.loads(pins["expression"]) == list(DELIVERY_ENV_NAMES)
    assert [e["name"] for e in DEMO_CONFIG.env] == list(DELIVERY_ENV_NAMES)


# -- CREATE: the final-state check -----------------------------------------------------------


@pytest.mark.parametrize("name", ["pod-create-workspace.json", "pod-create-many-containers.json"])
def test_an_injected_workspace_pod_is_admitted(pinned: Rendered, name: str) -> None:
    assert check(pinned, DELIVERY, injected(name)) is None


def test_the_gate_off_capture_once_injected_is_admitted_as_sent(pinned: Rendered) -> None:
    request = injected("extra-gate-off-pod-create-with-imagevolume.json")
    assert check(pinned, DELIVERY, request) is None


def test_a_pod_stripped_of_its_image_volumes_is_refused_naming_the_gate(pinned: Rendered) -> None:
    request = stripped(injected("extra-gate-off-pod-create-with-imagevolume.json"))
    workspace = container(request["object"], "workspace")
    assert {e["name"] for e in workspace["env"]} >= set(DELIVERY_ENV_NAMES)  # pins kept
    denial = check(pinned, DELIVERY, request)
    assert denial is not None
    assert denial.code == 403
    assert "image volumes" in denial.message
    assert "ImageVolume feature gate" in denial.message
    assert DEMO_CONFIG.agentd.image in denial.message
    assert denial.text().startswith(f"ValidatingAdmissionPolicy '{DELIVERY}' with binding")


def test_a_workspace_pod_the_injector_never_saw_is_refused(pinned: Rendered) -> None:
    denial = check(pinned, DELIVERY, capture("pod-create-workspace.json"))
    assert denial is not None
    assert "image volumes" in denial.message


def edit_volume_reference(pod: Obj) -> None:
    for volume in pod["spec"]["volumes"]:
        if volume["name"] == "agentd":
            volume["image"]["reference"] = "ghcr.io/example/agentd@sha256:" + "e" * 64


def edit_mount_writable(pod: Obj) -> None:
    for mount in container(pod, "workspace")["volumeMounts"]:
        if mount["name"] == "opencode":
            mount["readOnly"] = False


def edit_sidecar_mount_gone(pod: Obj) -> None:
    sidecar = container(pod, "agentd")
    sidecar["volumeMounts"] = [m for m in sidecar["volumeMounts"] if m["name"] != "agentd"]


def edit_subpath(pod: Obj) -> None:
    for mount in container(pod, "platform-init")["volumeMounts"]:
        if mount["name"] == "agentd":
            mount["subPath"] = "usr"


def edit_pin_value(pod: Obj) -> None:
    for entry in container(pod, "workspace")["env"]:
        if entry["name"] == "LLMSAFESPACES_AGENTD_SHA256_AMD64":
            entry["value"] = "f" * 64


def edit_pin_twice(pod: Obj) -> None:
    container(pod, "workspace")["env"].append({"name": "OPENCODE_IMAGE_VOLUME", "value": "1"})


def edit_pin_missing(pod: Obj) -> None:
    workspace = container(pod, "workspace")
    workspace["env"] = [e for e in workspace["env"] if e["name"] != "LLMSAFESPACES_OPENCODE_BINARY"]


def edit_receipt(pod: Obj) -> None:
    pod["metadata"]["annotations"]["llmsafespaces.dev/delivery"] = "{}"


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (edit_volume_reference, "image volumes"),
        (edit_mount_writable, "read-only delivery mounts"),
        (edit_sidecar_mount_gone, "read-only delivery mounts"),
        (edit_subpath, "no subPath"),
        (edit_pin_value, "delivery pins"),
        (edit_pin_twice, "each set once"),
        (edit_pin_missing, "delivery pins"),
        (edit_receipt, "receipt annotation"),
    ],
)
def test_any_gap_in_the_stored_wiring_is_refused(pinned: Rendered, edit: Any, words: str) -> None:
    request = injected()
    edit(request["object"])
    denial = check(pinned, DELIVERY, request)
    assert denial is not None
    assert words in denial.message


def test_registry_resolved_pins_are_checked_for_shape(registry_pins: Rendered) -> None:
    assert check(registry_pins, DELIVERY, injected()) is None
    request = injected()
    for entry in container(request["object"], "workspace")["env"]:
        if entry["name"] == "LLMSAFESPACES_OPENCODE_SHA256_ARM64":
            entry["value"] = "not-a-sha256"
    denial = check(registry_pins, DELIVERY, request)
    assert denial is not None
    assert "delivery pins" in denial.message


@pytest.mark.parametrize("name", ["pod-create-plain.json", "pod-update-labels.json"])
def test_pods_without_the_workspace_labels_are_not_judged(pinned: Rendered, name: str) -> None:
    for policy in (DELIVERY, INTEGRITY, DEBUG):
        assert check(pinned, policy, capture(name)) is None


# -- UPDATE: post-admission integrity --------------------------------------------------------


def test_a_label_update_of_a_stored_workspace_pod_is_allowed(pinned: Rendered) -> None:
    request = stored()
    assert request["operation"] == "UPDATE"
    assert check(pinned, INTEGRITY, request) is None


def swap_image(pod: Obj) -> None:
    container(pod, "workspace")["image"] = "docker.io/attacker/anything:latest"


def swap_init_image(pod: Obj) -> None:
    container(pod, "platform-init")["image"] = "docker.io/attacker/anything:latest"


def drop_receipt(pod: Obj) -> None:
    del pod["metadata"]["annotations"]["llmsafespaces.dev/delivery"]


def forge_receipt(pod: Obj) -> None:
    pod["metadata"]["annotations"]["llmsafespaces.dev/delivery"] = '{"agentd":"sha256:00"}'


def drop_workspace_label(pod: Obj) -> None:
    del pod["metadata"]["labels"]["llmsafespaces.dev/workspace"]


def relabel_component(pod: Obj) -> None:
    pod["metadata"]["labels"]["component"] = "debug"


def rewire_volume(pod: Obj) -> None:
    pod["spec"]["volumes"] = [v for v in pod["spec"]["volumes"] if v["name"] != "opencode"]


def change_pin(pod: Obj) -> None:
    container(pod, "workspace")["env"][-1]["value"] = "0" * 64


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (swap_image, "images"),
        (swap_init_image, "images"),
        (drop_receipt, "receipt annotation"),
        (forge_receipt, "receipt annotation"),
        (drop_workspace_label, "labels"),
        (relabel_component, "labels"),
        (rewire_volume, "delivery wiring"),
        (change_pin, "delivery wiring"),
    ],
)
def test_changing_images_or_wiring_of_a_stored_workspace_pod_is_refused(
    pinned: Rendered, change: Any, words: str
) -> None:
    request = updated(stored(), change)
    denial = check(pinned, INTEGRITY, request)
    assert denial is not None
    assert denial.code == 403
    assert words in denial.message


def test_an_image_swap_that_also_drops_the_labels_is_still_judged(pinned: Rendered) -> None:
    def both(pod: Obj) -> None:
        swap_image(pod)
        pod["metadata"]["labels"] = {}

    assert check(pinned, INTEGRITY, updated(stored(), both)) is not None


# -- pods/ephemeralcontainers ----------------------------------------------------------------


def debug_request(groups: list[str]) -> Obj:
    def add_debugger(pod: Obj) -> None:
        pod["spec"]["ephemeralContainers"] = [
            {"name": "debugger", "image": "busybox", "targetContainerName": "workspace"}
        ]

    request = updated(stored(), add_debugger)
    request["subResource"] = request["requestSubResource"] = "ephemeralcontainers"
    request["userInfo"] = {"username": "dev", "groups": groups}
    return request


def test_an_ephemeral_container_on_a_workspace_pod_is_refused(pinned: Rendered) -> None:
    request = debug_request(["system:authenticated", "tenant-devs"])
    assert check(pinned, INTEGRITY, request) is None  # the subresource is a policy of its own
    denial = check(pinned, DEBUG, request)
    assert denial is not None
    assert "ephemeral containers" in denial.message
    assert "webhook.allowEphemeralContainersForGroups" in denial.message


def test_named_groups_may_add_ephemeral_containers() -> None:
    allowed = render(
        ("minimal.yaml",), {**PINS, "webhook.allowEphemeralContainersForGroups": ["oncall"]}
    )
    assert check(allowed, DEBUG, debug_request(["system:authenticated", "oncall"])) is None
    assert check(allowed, DEBUG, debug_request(["system:authenticated"])) is not None
