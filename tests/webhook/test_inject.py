"""The injector against golden files, one input pod and its expected result per case.

Each ``testdata/inject/<case>.yaml`` is a pod; ``<case>.yaml.injected`` is the pod after the
patch, keys sorted. Cases are found by listing the folder; a golden without an input fails
as stale. ``WSPIN_REFRESH_GOLDEN=1`` rewrites the goldens (``make refresh-goldens``).
Every case is injected again on its own output and must give an empty patch.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from tests.webhook.conftest import example_config
from webhook.inject import InjectConfig, inject
from wspin.core.contract import DELIVERY_ANNOTATION
from wspin.core.errors import AdmissionDenied
from wspin.core.workspace_pod import workspace_pod_problem

TESTDATA = Path(__file__).parent / "testdata" / "inject"
REFRESH = os.environ.get("WSPIN_REFRESH_GOLDEN") == "1"

# Only cases that expect something other than a golden pod are listed here.
DENIED = {
    "labelled-no-workspace-container": "no container named 'workspace'",
    "conflict-foreign-volume-at-agentd": "mounts volume 'tools' at '/agentd', at or under /agentd",
    "conflict-emptydir-under-agentd": (
        "container 'workspace' mounts volume 'bin-overlay' at '/agentd/usr/local/bin', at or "
        "under /agentd, where only the agentd image volume may be mounted"
    ),
    "conflict-init-container-shadows-opencode": (
        r"init container 'platform-init' mounts volume 'bin-overlay' at '//opencode/.' "
        r"\(that is '/opencode'\), at or under /opencode"
    ),
    "conflict-workspace-runs-a-shell": (
        r"container 'workspace' must run the delivered agentd: command "
        r"\[/agentd/usr/local/bin/workspace-agentd\] with args \[--supervise\] or args "
        r'\[supervise-opencode\] \(got command \["sh"\]'
    ),
    "conflict-sidecar-extra-args": (
        r"the 'agentd' sidecar must run the delivered agentd: command "
        r"\[/agentd/usr/local/bin/workspace-agentd, --sidecar\] and no args"
    ),
    "conflict-agentd-subpath": (
        "container 'workspace' mounts volume 'agentd' at '/agentd' with subPath "
        "'usr/local/bin'; the agentd image volume may only be mounted whole"
    ),
}
WARNINGS = {
    "workspace-forged-pins": [
        "volume 'agentd' replaced by the digest-pinned image volume (was emptyDir)",
        "env LLMSAFESPACES_AGENTD_SHA256_AMD64 on container 'workspace' replaced",
        "env AGENTD_IMAGE_VOLUME on container 'workspace' replaced",
    ],
    "workspace-opencode-on-sidecar": [
        "volume 'opencode' replaced by the digest-pinned image volume (was emptyDir)",
        "mount of 'opencode' removed from container 'agentd'",
    ],
    "workspace-agentd-mount-trailing-slash": [
        "mount /agentd in container 'workspace' replaced by a read-only mount",
    ],
    "workspace-writable-mount-duplicate-env": [
        "mount /agentd in container 'workspace' replaced by a read-only mount",
        "duplicate env LLMSAFESPACES_OPENCODE_SHA256_ARM64 removed",
    ],
}

CASES = sorted(p.name.removesuffix(".yaml") for p in TESTDATA.glob("*.yaml"))


def load(case: str) -> dict[str, Any]:
    pod: dict[str, Any] = yaml.safe_load((TESTDATA / f"{case}.yaml").read_text())
    return pod


def render(pod: dict[str, Any]) -> str:
    return yaml.safe_dump(pod, sort_keys=True)


def compare_golden(case: str, pod: dict[str, Any]) -> None:
    golden = TESTDATA / f"{case}.yaml.injected"
    actual = render(pod)
    if REFRESH:
        golden.write_text(actual)
        return
    assert golden.exists(), f"no golden for {case}: run `make refresh-goldens` and review it"
    expected = golden.read_text()
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(True),
                actual.splitlines(True),
                f"{case}.yaml.injected",
                "actual",
            )
        )
        pytest.fail(f"injected pod differs from the golden:\n{diff}")


def test_every_golden_has_an_input_case() -> None:
    stale = [
        p.name
        for p in TESTDATA.glob("*.injected")
        if p.name.removesuffix(".yaml.injected") not in CASES
    ]
    assert not stale, f"stale goldens with no input: {stale}"


@pytest.mark.parametrize("case", [c for c in CASES if c not in DENIED])
def test_injection_matches_golden_and_is_idempotent(case: str, inject_config: InjectConfig) -> None:
    pod = load(case)
    injection = inject(pod, inject_config)
    result = jsonpatch.apply_patch(pod, list(injection.patch))
    compare_golden(case, result)
    for expected in WARNINGS.get(case, []):
        assert any(expected in w for w in injection.warnings), (expected, injection.warnings)
    if case not in WARNINGS:
        assert injection.warnings == ()
    again = inject(result, inject_config)
    assert again.patch == ()
    assert again.warnings == ()


@pytest.mark.parametrize("case", sorted(DENIED))
def test_conflicting_pods_are_denied_with_a_reason(case: str, inject_config: InjectConfig) -> None:
    with pytest.raises(AdmissionDenied, match=DENIED[case]):
        inject(load(case), inject_config)


def test_pod_wired_by_other_means_gets_only_the_receipt(inject_config: InjectConfig) -> None:
    injection = inject(load("workspace-already-injected"), inject_config)
    assert [op["path"] for op in injection.patch] == [
        "/metadata/annotations/llmsafespaces.dev~1delivery"
    ]


def test_receipt_records_each_artifact_digest(inject_config: InjectConfig) -> None:
    pod = jsonpatch.apply_patch(
        load("workspace"), list(inject(load("workspace"), inject_config).patch)
    )
    assert yaml.safe_load(pod["metadata"]["annotations"][DELIVERY_ANNOTATION]) == {
        "agentd": "sha256:" + "0123456789abcdef" * 4,
        "opencode": "sha256:" + "fedcba9876543210" * 4,
    }


def test_fresh_pod_is_patched_with_appends_only(inject_config: InjectConfig) -> None:
    injection = inject(load("workspace"), inject_config)
    assert {op["op"] for op in injection.patch} == {"add"}


def test_opencode_is_mounted_on_the_workspace_container_only(inject_config: InjectConfig) -> None:
    pod = load("workspace-many-containers")
    result = jsonpatch.apply_patch(pod, list(inject(pod, inject_config).patch))
    holders = [
        c["name"]
        for kind in ("containers", "initContainers")
        for c in result["spec"].get(kind, [])
        if any(m["mountPath"] == "/opencode" for m in c.get("volumeMounts", []))
    ]
    assert holders == ["workspace"]
    agentd_holders = {
        c["name"]
        for kind in ("containers", "initContainers")
        for c in result["spec"].get(kind, [])
        if any(m["mountPath"] == "/agentd" for m in c.get("volumeMounts", []))
    }
    assert agentd_holders == {
        "workspace",
        "agentd",
        "platform-init",
        "platform-bootstrap",
        "platform-materialize",
    }


def test_pin_env_is_on_the_workspace_container_only(inject_config: InjectConfig) -> None:
    pod = load("workspace")
    result = jsonpatch.apply_patch(pod, list(inject(pod, inject_config).patch))
    for kind in ("containers", "initContainers"):
        for container in result["spec"].get(kind, []):
            names = [e["name"] for e in container.get("env", [])]
            pins = [n for n in names if n.startswith("LLMSAFESPACES_") or "_IMAGE_VOLUME" in n]
            if container["name"] == "workspace":
                assert pins == [
                    "AGENTD_IMAGE_VOLUME",
                    "LLMSAFESPACES_AGENTD_BINARY",
                    "LLMSAFESPACES_AGENTD_SHA256_AMD64",
                    "LLMSAFESPACES_AGENTD_SHA256_ARM64",
                    "OPENCODE_IMAGE_VOLUME",
                    "LLMSAFESPACES_OPENCODE_BINARY",
                    "LLMSAFESPACES_OPENCODE_SHA256_AMD64",
                    "LLMSAFESPACES_OPENCODE_SHA256_ARM64",
                ]
            else:
                assert pins == [], container["name"]


def test_a_new_digest_replaces_the_receipt_and_volumes() -> None:
    pod = load("workspace-already-injected")
    old = example_config()
    pod = jsonpatch.apply_patch(pod, list(inject(pod, old).patch))
    newer = InjectConfig(
        agentd=old.agentd.__class__(
            old.agentd.artifact, old.agentd.image[:-64] + "1" * 64, old.agentd.pins
        ),
        opencode=old.opencode,
    )
    injection = inject(pod, newer)
    assert any("volume 'agentd' replaced" in w for w in injection.warnings)
    result = jsonpatch.apply_patch(pod, list(injection.patch))
    assert inject(result, newer).patch == ()


def test_problem_names_the_containers_that_are_there() -> None:
    pod = {
        "metadata": {"labels": {"llmsafespaces.dev/workspace": "w"}},
        "spec": {"containers": [{"name": "main"}, {"name": "log"}]},
    }
    problem = workspace_pod_problem(pod)
    assert problem is not None
    assert "'main', 'log'" in problem
