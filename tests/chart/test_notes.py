"""NOTES.txt per Kubernetes version: what must be enabled below 1.35, nothing from 1.35 on
(rendered by ``notes.render_notes`` as a release on each version would show it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chart.notes import render_notes


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
