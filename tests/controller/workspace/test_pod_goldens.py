"""The pod builder against golden files, then through the injector.

Each ``testdata/pod/<case>.yaml`` holds a Workspace and the controller settings that differ
from ``pod_cases.BASE`` (every optional URL set, default runtime class ``gvisor``).
``<case>.yaml.pod`` is the pod ``desired_pod`` builds and ``<case>.yaml.injected`` that pod
after the admission webhook's patch (the example release's pins), keys sorted. Cases are found
by listing the folder; a golden without an input fails as stale. ``WSPIN_REFRESH_GOLDEN=1``
rewrites the goldens (``make refresh-goldens``). Every injected pod is injected again and must
give an empty patch, and every golden pod is a valid core/v1 Pod of Kubernetes 1.32.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest
import yaml

from controller.workspace.pod.builder import desired_pod
from tests.controller.workspace.factories import credentials
from tests.controller.workspace.pod_cases import CASES, RELEASE, TESTDATA, load
from webhook.inject import inject

REFRESH = os.environ.get("WSPIN_REFRESH_GOLDEN") == "1"


def render(obj: dict[str, Any]) -> str:
    return yaml.safe_dump(obj, sort_keys=True)


def compare_golden(golden: Path, obj: dict[str, Any]) -> None:
    actual = render(obj)
    if REFRESH:
        golden.write_text(actual)
        return
    assert golden.exists(), f"no golden {golden.name}: run `make refresh-goldens` and review it"
    expected = golden.read_text()
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(True), actual.splitlines(True), golden.name, "actual"
            )
        )
        pytest.fail(f"{golden.name} is stale:\n{diff}")


def built(case: str) -> dict[str, Any]:
    ws, settings = load(case)
    return desired_pod(ws, settings, credentials=credentials(ws))


def test_every_golden_has_an_input_case() -> None:
    stale = [
        p.name
        for p in [*TESTDATA.glob("*.pod"), *TESTDATA.glob("*.injected")]
        if p.name.split(".yaml.")[0] not in CASES
    ]
    assert not stale, f"stale goldens with no input: {stale}"


@pytest.mark.parametrize("case", CASES)
def test_built_pod_matches_its_golden(case: str) -> None:
    compare_golden(TESTDATA / f"{case}.yaml.pod", built(case))


@pytest.mark.parametrize("case", CASES)
def test_injected_pod_matches_its_golden_and_reinjects_to_an_empty_patch(case: str) -> None:
    pod = built(case)
    injection = inject(pod, RELEASE)
    assert injection.warnings == (), "a built pod must need no replacement, only additions"
    injected = jsonpatch.apply_patch(pod, list(injection.patch))
    compare_golden(TESTDATA / f"{case}.yaml.injected", injected)
    again = inject(injected, RELEASE)
    assert again.patch == ()
    assert again.warnings == ()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("stage", ["pod", "injected"])
def test_golden_pods_are_valid_kubernetes_1_32_pods(case: str, stage: str) -> None:
    golden = TESTDATA / f"{case}.yaml.{stage}"
    pod = yaml.safe_load(golden.read_text()) if golden.exists() else built(case)
    kubernetes_validate.validate(pod, "1.32", strict=True)
