"""The relay staging pass runs in every phase that may hold staged material."""

from __future__ import annotations

from typing import get_args

from controller.workspace.reconcile.staging_phases import stages_in
from wspin.core.fleet import Phase


def test_every_phase_but_terminating_runs_the_staging_pass() -> None:
    phases = get_args(Phase)
    assert {p for p in phases if stages_in(p)} == set(phases) - {"Terminating"}
    assert stages_in("Pending") and stages_in("Suspended")
