"""``examples/workspace-pod.yaml`` is generated from the pod builder and kept up to date."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import yaml

from controller.workspace.pod.builder import names

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "example_pod.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_pod", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_pod_is_what_the_builder_makes_of_the_example_workspace() -> None:
    script = _script()
    assert script.POD.read_text() == script.example_pod_text(), (
        "examples/workspace-pod.yaml is stale: run `make refresh-goldens`"
    )


def test_the_example_pod_is_the_sidecar_mode_pod_of_the_example_workspace() -> None:
    script = _script()
    pod = yaml.safe_load(script.POD.read_text())
    ws = yaml.safe_load(script.WORKSPACE.read_text())
    ws["metadata"]["uid"] = script.UID
    assert pod["metadata"]["name"] == names(ws).pod
    assert pod["spec"]["initContainers"][-1]["name"] == "agentd"
    assert pod["spec"]["initContainers"][-1]["restartPolicy"] == "Always"
    volumes = {v["name"] for v in pod["spec"]["volumes"]}
    assert not volumes & {"agentd", "opencode"}, "delivery wiring is the webhook's to add"


def test_the_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    script = _script()
    stale = tmp_path / "workspace-pod.yaml"
    stale.write_text("# hand-written\n")
    output = ["--output", str(stale)]
    assert script.main(["--check", *output]) == 1
    assert script.main(output) == 0
    assert script.main(["--check", *output]) == 0
