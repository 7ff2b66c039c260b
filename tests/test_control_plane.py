"""The real-server lane's harness (``tests/support/apiserver.py``) and its make target: what
they refuse and what they leave behind, with stand-in binaries (the lane itself is the test
that the real ones come up)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.apiserver import (
    ASSETS_ENV,
    CHART_ADMISSION_LABEL,
    ControlPlane,
    ControlPlaneError,
    assets_dir,
    chart_admission_objects,
)

REPO = Path(__file__).resolve().parents[1]


def stand_in(directory: Path, name: str, script: str) -> None:
    path = directory / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


def test_assets_without_the_binaries_are_refused_naming_the_variable(tmp_path: Path) -> None:
    stand_in(tmp_path, "etcd", "exit 0")
    with pytest.raises(ControlPlaneError) as refused:
        assets_dir(str(tmp_path))
    assert f"{ASSETS_ENV}={tmp_path} has no executable kube-apiserver" in str(refused.value)
    assert "setup-envtest use 1.32" in str(refused.value)


def test_an_api_server_that_exits_fails_the_start_with_its_log_and_leaves_no_process(
    tmp_path: Path,
) -> None:
    assets = tmp_path / "bin"
    assets.mkdir()
    stand_in(assets, "etcd", f"echo $$ > {tmp_path}/etcd.pid; exec sleep 300")
    stand_in(assets, "kube-apiserver", "echo 'flag provided but not defined' >&2; exit 3")
    with (
        pytest.raises(ControlPlaneError) as failed,
        ControlPlane.running(assets_dir(str(assets)), tmp_path / "work"),
    ):
        pass
    assert "kube-apiserver exited (3)" in str(failed.value)
    assert "flag provided but not defined" in str(failed.value)
    etcd = int((tmp_path / "etcd.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(etcd, 0)


def test_the_chart_admission_objects_judge_only_what_opted_in() -> None:
    objects = chart_admission_objects()
    policies = {o["metadata"]["name"] for kind, o in objects if kind.endswith("Policy")}
    bindings = [o for kind, o in objects if kind.endswith("Binding")]
    assert {b["spec"]["policyName"] for b in bindings} == policies
    opted_in = {"matchLabels": {CHART_ADMISSION_LABEL: "true"}}
    for binding in bindings:
        match = binding["spec"]["matchResources"]
        assert match["namespaceSelector"] == opted_in
        if binding["spec"]["policyName"].endswith("-runtime-environments"):
            assert match["objectSelector"] == opted_in  # cluster-scoped: no namespace to label


def test_the_lane_without_assets_stops_naming_the_variable_and_setup_envtest() -> None:
    env = {k: v for k, v in os.environ.items() if k != ASSETS_ENV}
    proc = subprocess.run(
        ["make", "-s", "kubebuilder-assets"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert "KUBEBUILDER_ASSETS is not set" in proc.stderr
    assert "setup-envtest use 1.32" in proc.stderr
