"""NOTES.txt per Kubernetes version: what must be enabled below 1.35, nothing from 1.35 on.

`helm template` never renders NOTES.txt and `helm install --dry-run` takes no version, so a
copy of the chart renders the notes through ``tpl`` inside a ConfigMap, with the same
values, release and ``--kube-version``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.chart.helm import CHART, NAMESPACE, run_helm, template_args

_PROBE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: notes-under-test
data:
  notes: {{ tpl (.Files.Get "files/notes-under-test.txt") . | toJson }}
"""


def render_notes(
    tmp_path: Path, kube_version: str | None, namespace: str = NAMESPACE, **sets: object
) -> str:
    chart = tmp_path / "wspin"
    shutil.copytree(CHART, chart)
    shutil.copy(chart / "templates" / "NOTES.txt", chart / "files" / "notes-under-test.txt")
    (chart / "templates" / "notes-under-test.yaml").write_text(_PROBE)
    args = template_args(kube_version=kube_version, namespace=namespace, sets=sets)
    args[args.index(str(CHART))] = str(chart)
    result = run_helm([*args, "--show-only", "templates/notes-under-test.yaml"])
    assert result.returncode == 0, result.stderr
    notes: str = yaml.safe_load(result.stdout)["data"]["notes"]
    return notes


@pytest.mark.parametrize(
    ("version", "stage"), [("1.31.0", "alpha"), ("1.32.4", "alpha"), ("1.34.1", "beta")]
)
def test_below_1_35_the_notes_say_which_gate_to_enable_and_what_happens_without_it(
    tmp_path: Path, version: str, stage: str
) -> None:
    notes = render_notes(tmp_path, version)
    assert f"Kubernetes v{version}: image volumes need the ImageVolume feature gate" in notes
    assert f"({stage}, off by default) on kube-apiserver and every kubelet" in notes
    assert "--feature-gates=ImageVolume=true" in notes
    assert "the webhook stays unready" in notes


@pytest.mark.parametrize("version", ["1.35.0", "1.36.2-eks-1a2b3c"])
def test_from_1_35_on_the_notes_ask_for_nothing(tmp_path: Path, version: str) -> None:
    notes = render_notes(tmp_path, version)
    assert "ImageVolume" not in notes
    assert "wspin check --namespace wspin --release wspin" in notes
