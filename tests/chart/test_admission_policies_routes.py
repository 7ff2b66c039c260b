"""The chart's workspace-pod policies on every route a tenant can take, evaluated with CEL.

What the policies must hold without the webhook: nothing mounted at or under the delivery
paths but the delivery volumes (with paths the policy cannot normalise refused when they name a
delivery segment), the delivered entry point on the ``workspace`` container and the agentd
sidecar, and no label, annotation or resource change through ``pods/status``,
``pods/resize`` or ``pods/binding``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.chart.helm import NAMESPACE, Rendered
from tests.chart.pod_policies import (
    DELIVERY,
    INTEGRITY,
    check,
    container,
    injected,
    stored,
    updated,
)
from wspin.core.contract import AGENTD
from wspin.core.objects import Obj
from wspin.core.workspace_pod import SIDECAR_COMMAND, WORKSPACE_ARGS, WORKSPACE_COMMAND

BINDING = f"wspin-{NAMESPACE}-workspace-pod-binding"


def with_mount(kind: str, name: str, path: str, *, device: bool = False) -> Obj:
    """An injected workspace pod plus an emptyDir ``shadow`` mounted at ``path`` in ``name``."""
    request = injected()
    pod = request["object"]
    pod["spec"]["volumes"].append({"name": "shadow", "emptyDir": {}})
    if kind == "ephemeralContainers":
        pod["spec"]["ephemeralContainers"] = [{"name": name, "image": "busybox"}]
        target = pod["spec"]["ephemeralContainers"][0]
    else:
        target = container(pod, name)
    field, key = ("volumeDevices", "devicePath") if device else ("volumeMounts", "mountPath")
    target.setdefault(field, []).append({"name": "shadow", key: path})
    return request


SHADOWING = [
    "/agentd/usr/local/bin",
    "/agentd",
    "/opencode/usr/local/bin",
    "/agentd/",
    "//agentd/usr",
    "/./agentd",
    "/tmp/../agentd/usr/local/bin",
    "/agentd/.",
    "agentd/usr/local/bin",
    "/data/../opencode",
]


@pytest.mark.parametrize("path", SHADOWING)
@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("containers", "workspace"),
        ("initContainers", "platform-init"),
        ("initContainers", "agentd"),
    ],
)
def test_a_volume_shadowing_the_delivery_paths_is_refused_without_the_webhook(
    pinned: Rendered, kind: str, name: str, path: str
) -> None:
    denial = check(pinned, DELIVERY, with_mount(kind, name, path))
    assert denial is not None
    assert "shadow the pinned binaries" in denial.message
    assert denial.code == 403


@pytest.mark.parametrize("path", ["/agentd/usr/local/bin", "/tmp/../opencode"])
def test_a_block_device_or_ephemeral_container_at_the_delivery_paths_is_refused(
    pinned: Rendered, path: str
) -> None:
    device = with_mount("containers", "workspace", path, device=True)
    assert check(pinned, DELIVERY, device) is not None
    ephemeral = with_mount("ephemeralContainers", "debugger", path)
    assert check(pinned, DELIVERY, ephemeral) is not None


@pytest.mark.parametrize(
    "path", ["/data/agentd", "/home/u/.agentd", "/srv/agentd.bak", "/data/./cache", "/x/../y"]
)
def test_other_mount_paths_pass_the_shadowing_rule(pinned: Rendered, path: str) -> None:
    assert check(pinned, DELIVERY, with_mount("containers", "workspace", path)) is None


def set_command(name: str, command: list[str] | None, args: list[str] | None) -> Any:
    def edit(pod: Obj) -> None:
        target = container(pod, name)
        for field, value in (("command", command), ("args", args)):
            if value is None:
                target.pop(field, None)
            else:
                target[field] = value

    return edit


@pytest.mark.parametrize(
    "edit",
    [
        set_command("workspace", ["sh"], ["-c", "exec busybox httpd"]),
        set_command("workspace", None, None),
        set_command("workspace", list(WORKSPACE_COMMAND), ["--version"]),
        set_command("workspace", list(WORKSPACE_COMMAND), ["--supervise", "--debug-shell"]),
        set_command("workspace", [AGENTD.binary_path, "--supervise"], None),
        set_command("agentd", ["sh"], None),
        set_command("agentd", list(SIDECAR_COMMAND), ["--extra"]),
    ],
)
def test_a_workspace_pod_that_does_not_run_the_delivered_agentd_is_refused(
    pinned: Rendered, edit: Any
) -> None:
    request = injected()
    edit(request["object"])
    denial = check(pinned, DELIVERY, request)
    assert denial is not None
    assert "runs the delivered agentd" in denial.message


@pytest.mark.parametrize("args", WORKSPACE_ARGS)
def test_the_delivered_entry_points_are_admitted(pinned: Rendered, args: tuple[str, ...]) -> None:
    request = injected()
    set_command("workspace", list(WORKSPACE_COMMAND), list(args))(request["object"])
    assert check(pinned, DELIVERY, request) is None


# -- pods/status, pods/resize ----------------------------------------------------------------


def through(sub: str, change: Any) -> Obj:
    """An UPDATE of the stored workspace pod through subresource ``sub``."""
    request = updated(stored(), change)
    request["subResource"] = request["requestSubResource"] = sub
    return request


def drop_app_label(pod: Obj) -> None:
    del pod["metadata"]["labels"]["app"]


def retenant(pod: Obj) -> None:
    pod["metadata"]["labels"]["llmsafespaces.dev/tenant"] = "someone-else"


def untenant(pod: Obj) -> None:
    pod["metadata"]["labels"].pop("llmsafespaces.dev/tenant", None)


def claim_owner(pod: Obj) -> None:
    pod["metadata"]["labels"]["llmsafespaces.dev/workspace-uid"] = "forged"


def forge_runtime_env(pod: Obj) -> None:
    pod["metadata"]["annotations"]["llmsafespaces.dev/runtime-env"] = "python"


def grow(pod: Obj) -> None:
    container(pod, "workspace")["resources"] = {"requests": {"cpu": "64", "memory": "256Gi"}}


@pytest.mark.parametrize(
    ("sub", "change", "words"),
    [
        ("status", drop_app_label, "labels"),
        ("status", retenant, "labels"),
        ("status", untenant, "labels"),
        ("status", claim_owner, "labels"),
        ("status", forge_runtime_env, "annotations"),
        ("", retenant, "labels"),
        ("resize", grow, "resources"),
        ("", grow, "resources"),
    ],
)
def test_labels_annotations_and_resources_hold_through_every_route(
    pinned: Rendered, sub: str, change: Any, words: str
) -> None:
    request = through(sub, change) if sub else updated(stored(), change)
    denial = check(pinned, INTEGRITY, request)
    assert denial is not None
    assert words in denial.message


def test_a_status_write_that_keeps_the_labels_is_allowed(pinned: Rendered) -> None:
    def kubelet(pod: Obj) -> None:
        pod.setdefault("status", {})["phase"] = "Running"

    assert check(pinned, INTEGRITY, through("status", kubelet)) is None


# -- pods/binding ----------------------------------------------------------------------------


def binding_request(annotations: dict[str, str]) -> Obj:
    request = copy.deepcopy(stored())
    meta: Obj = {"name": request["name"], "namespace": request["namespace"]}
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    if annotations:
        meta["annotations"] = annotations
    return {
        **request,
        "operation": "CREATE",
        "kind": {"group": "", "version": "v1", "kind": "Binding"},
        "subResource": "binding",
        "requestSubResource": "binding",
        "object": binding,
        "oldObject": None,
    }


def test_a_binding_that_plants_platform_annotations_is_refused(pinned: Rendered) -> None:
    forged = binding_request({"llmsafespaces.dev/delivery": '{"agentd":"sha256:00"}'})
    denial = check(pinned, BINDING, forged)
    assert denial is not None
    assert "Binding" in denial.message
    assert check(pinned, BINDING, binding_request({})) is None
    assert check(pinned, BINDING, binding_request({"scheduler.example/zone": "a"})) is None
