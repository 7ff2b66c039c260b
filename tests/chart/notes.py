"""NOTES.txt as a release shows it. ``helm template`` never renders NOTES.txt and ``helm install
--dry-run`` takes no version, so a copy of the chart renders the notes through ``tpl`` inside a
ConfigMap, with the same values, release and ``--kube-version``."""

from __future__ import annotations

import shutil
from pathlib import Path

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
    """The notes a release with ``sets`` in ``namespace`` shows on ``kube_version`` (the chart
    is copied under ``tmp_path``)."""
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
