"""Path rules: no volume shadows /agentd or /opencode, whatever spelling its path uses.

Every path variant is tried on every container kind: the workspace container, an ordinary
container, the agentd native sidecar, a platform-* init container, an ordinary init
container, and an ephemeral container.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from tests.webhook.conftest import example_config
from webhook.inject import inject
from webhook.mountpaths import normalise
from wspin.core.errors import AdmissionDenied

CONFIG = example_config()

# (kind, container name): one of each container kind the path rules apply to.
CONTAINERS = [
    ("containers", "workspace"),
    ("containers", "tools"),
    ("initContainers", "agentd"),
    ("initContainers", "platform-init"),
    ("initContainers", "setup"),
    ("ephemeralContainers", "debugger"),
]
KIND_WORDS = {
    "containers": "container",
    "initContainers": "init container",
    "ephemeralContainers": "ephemeral container",
}
SHADOWING = [
    "/agentd",
    "/agentd/usr/local/bin",
    "/agentd/",
    "//agentd",
    "/agentd/.",
    "/./agentd",
    "/a/../agentd",
    "/../agentd",
    "agentd",
    "/agentd//usr/./local/../local/bin/",
    "/opencode",
    "/opencode/usr/local/bin",
    "/opencode/",
    "//opencode//",
    "/x/y/../../opencode/.",
    "/.cache/../agentd",
    "/.x/..agentd/../../opencode",
]
HARMLESS = [
    "/agentdx",
    "/agentd-data",
    "/opt/agentd",
    "/a/agentd/..",
    "/",
    "/usr/local/bin",
    "/home/.agentd",
    "/.opencode",
    "/x/..agentd",
]

TESTDATA = Path(__file__).parent / "testdata" / "inject"
"""The injector's golden cases, whose pods these tests reuse."""


def pod_with(kind: str, name: str, mount: dict[str, Any] | None = None) -> dict[str, Any]:
    """The workspace pod, with a ``scratch`` emptyDir, the container ``name`` of ``kind``
    present, and ``mount`` added to it."""
    pod: dict[str, Any] = yaml.safe_load((TESTDATA / "workspace.yaml").read_text())
    spec = pod["spec"]
    spec["volumes"].append({"name": "scratch", "emptyDir": {}})
    containers = spec.setdefault(kind, [])
    container = next((c for c in containers if c["name"] == name), None)
    if container is None:
        container = {"name": name, "image": "busybox"}
        if kind == "initContainers" and name == "agentd":
            container["restartPolicy"] = "Always"
        containers.append(container)
    if mount is not None:
        container.setdefault("volumeMounts", []).append(mount)
    return pod


@pytest.mark.parametrize(("kind", "name"), CONTAINERS)
@pytest.mark.parametrize("path", SHADOWING)
def test_another_volume_at_or_under_a_delivery_path_is_denied(
    kind: str, name: str, path: str
) -> None:
    pod = pod_with(kind, name, {"name": "scratch", "mountPath": path})
    with pytest.raises(AdmissionDenied) as denied:
        inject(pod, CONFIG)
    message = str(denied.value)
    assert f"{KIND_WORDS[kind]} {name!r} mounts volume 'scratch' at {path!r}" in message
    root = "/agentd" if "agentd" in normalise(path) else "/opencode"
    assert f"at or under {root}" in message
    assert denied.value.code == 403


@pytest.mark.parametrize(("kind", "name"), CONTAINERS)
@pytest.mark.parametrize("path", ["/agentd/usr/local/bin/workspace-agentd", "//opencode/x"])
def test_a_block_device_at_or_under_a_delivery_path_is_denied(
    kind: str, name: str, path: str
) -> None:
    pod = pod_with(kind, name)
    container = next(c for c in pod["spec"][kind] if c["name"] == name)
    container["volumeDevices"] = [{"name": "scratch", "devicePath": path}]
    with pytest.raises(AdmissionDenied, match=f"places block device 'scratch' at {path!r}"):
        inject(pod, CONFIG)


@pytest.mark.parametrize(("kind", "name"), CONTAINERS)
@pytest.mark.parametrize(
    "mount",
    [
        {"name": "agentd", "mountPath": "/usr/local/bin"},
        {"name": "agentd", "mountPath": "/agentd/usr"},
        {"name": "agentd", "mountPath": "/agentd", "subPath": "usr/local/bin"},
        {"name": "agentd", "mountPath": "/agentd", "subPathExpr": "$(POD)"},
        {"name": "opencode", "mountPath": "/agentd"},
        {"name": "opencode", "mountPath": "/opencode/usr", "readOnly": True},
        {"name": "agentd", "mountPath": "/opencode"},
    ],
)
def test_our_volumes_are_mounted_only_whole_at_their_own_path(
    kind: str, name: str, mount: dict[str, Any]
) -> None:
    pod = pod_with(kind, name, mount)
    with pytest.raises(AdmissionDenied) as denied:
        inject(pod, CONFIG)
    message = str(denied.value)
    assert f"{KIND_WORDS[kind]} {name!r} mounts volume {mount['name']!r}" in message
    assert repr(mount["mountPath"]) in message
    assert f"may only be mounted whole, read-only, at /{mount['name']}" in message
    sub = mount.get("subPath") or mount.get("subPathExpr")
    if sub:
        assert f"with subPath {sub!r}" in message


@pytest.mark.parametrize(("kind", "name"), CONTAINERS)
@pytest.mark.parametrize("path", HARMLESS)
def test_paths_beside_the_delivery_paths_are_left_alone(kind: str, name: str, path: str) -> None:
    pod = pod_with(kind, name, {"name": "scratch", "mountPath": path})
    result = jsonpatch.apply_patch(pod, list(inject(pod, CONFIG).patch))
    container = next(c for c in result["spec"][kind] if c["name"] == name)
    assert {"name": "scratch", "mountPath": path} in container["volumeMounts"]
    assert inject(result, CONFIG).patch == ()


@pytest.mark.parametrize("path", ["/agentd/", "//agentd", "/./agentd/.", "/a/../agentd"])
def test_our_volume_spelt_differently_at_our_path_is_rewritten(path: str) -> None:
    pod = pod_with("containers", "workspace", {"name": "agentd", "mountPath": path})
    injection = inject(pod, CONFIG)
    assert any("mount /agentd in container 'workspace' replaced" in w for w in injection.warnings)
    result = jsonpatch.apply_patch(pod, list(injection.patch))
    mounts = result["spec"]["containers"][0]["volumeMounts"]
    assert [m for m in mounts if m["name"] == "agentd"] == [
        {"name": "agentd", "readOnly": True, "mountPath": "/agentd"}
    ]
    assert inject(result, CONFIG).patch == ()


def test_an_injected_pod_with_a_shadowing_debug_container_added_is_denied() -> None:
    pod = pod_with("containers", "workspace")
    pod = jsonpatch.apply_patch(pod, list(inject(pod, CONFIG).patch))
    debugged = copy.deepcopy(pod)
    debugged["spec"]["ephemeralContainers"] = [
        {"name": "dbg", "volumeMounts": [{"name": "scratch", "mountPath": "/opencode/usr/local"}]}
    ]
    with pytest.raises(AdmissionDenied, match="ephemeral container 'dbg' mounts volume 'scratch'"):
        inject(debugged, CONFIG)


@pytest.mark.parametrize(
    ("path", "normal"),
    [
        ("/agentd", "/agentd"),
        ("//agentd", "/agentd"),
        ("/agentd/", "/agentd"),
        ("/agentd/.", "/agentd"),
        ("/./agentd", "/agentd"),
        ("/a/../agentd", "/agentd"),
        ("/../../agentd", "/agentd"),
        ("agentd/bin", "/agentd/bin"),
        ("/a/.hidden/./b", "/a/.hidden/b"),
        ("/workspace/.cache", "/workspace/.cache"),
        ("/a/..b/.c..", "/a/..b/.c.."),
        ("/a/.", "/a"),
        ("/a/b/..", "/a"),
        ("/.x/../agentd", "/agentd"),
        ("", "/"),
        ("/", "/"),
    ],
)
def test_normalise_resolves_what_the_runtime_resolves(path: str, normal: str) -> None:
    assert normalise(path) == normal
