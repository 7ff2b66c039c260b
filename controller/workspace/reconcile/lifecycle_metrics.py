"""The Workspace lifecycle as counters and histograms, under the names LLMSafeSpaces dashboards
and alert routes use. The Workspace reconciler calls ``status_written`` after every status
write that changed something and ``deletion_finished`` once a Workspace's finalizer is gone;
nothing here reads a cache or a clock.

- ``llmsafespaces_workspaces_created_total{runtime,security_level}``: a Workspace became Active
  (every activation, as LLMSafeSpaces counts it, not only the first);
- ``llmsafespaces_workspaces_deleted_total{runtime,security_level}``: a Workspace's deletion
  finished (its finalizer removed);
- ``llmsafespaces_workspace_phase_transitions_total{from_phase,to_phase}``;
- ``llmsafespaces_workspace_create_duration_seconds{has_packages,has_init_script}``: from the
  request (``status.pendingAt``) to the first time Active;
- ``llmsafespaces_workspace_resume_duration_seconds{resume_type}``: from the resume
  (``status.resumedAt``) to Active again: ``first_resume`` for a Workspace's first resume
  (``status.resumeCount`` 1), ``subsequent_resume`` after that. LLMSafeSpaces keyed this on a
  restart count no resume changes, so every resume read as its first;
- ``llmsafespaces_workspace_init_container_duration_seconds``: how long ``workspace-setup``
  (``spec.packages`` and ``spec.initScript``) ran, for the pod that made the Workspace Active;
- ``llmsafespaces_workspace_status_update_conflicts_total{site}``: the controller's own writes
  of a Workspace the API server answered with a conflict (409): ``status`` (a merge patch
  without a resourceVersion, which a conflict cannot meet, so it stays 0) and ``finalizer``
  (written with the version read, so another writer's change in between refuses it).

Labels are drawn from bounded sets (``wspin.core.fleet``'s runtime and security level, the phase
enum, booleans): never a Workspace's name or owner, so no counter gains a series per Workspace.
Unlike LLMSafeSpaces, a creation or resume slower than 10 minutes is observed too (in the
``+Inf`` bucket): a dropped observation would hide exactly the slowness its alert looks for.
"""

from __future__ import annotations

import datetime
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram

from controller.types import Obj
from wspin.core import fleet
from wspin.core.clock import parse_time
from wspin.core.workspace import WorkspaceSpec, WorkspaceStatus

DURATION_BUCKETS: Final = (1, 3, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300)
"""Seconds; the buckets LLMSafeSpaces' creation-time panels and alerts were written for."""
CONFLICT_SITES: Final = ("status", "finalizer")
"""Where a Workspace write can meet a conflict (``write_conflict``)."""
SETUP_BUCKETS: Final = (0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
"""Seconds; package installs take from under a second to minutes."""


def _phase(value: str) -> str:
    return value if value in fleet.PHASES else fleet.UNKNOWN


def _flag(value: object) -> str:
    return "true" if value else "false"


class LifecycleMetrics:
    """Records phase transitions, activations and deletions of Workspaces."""

    def __init__(self, registry: CollectorRegistry) -> None:
        kinds = ["runtime", "security_level"]
        self.conflicts = Counter(
            "llmsafespaces_workspace_status_update_conflicts_total",
            "The controller's writes of a Workspace answered with a conflict (409), by site: "
            "status, finalizer.",
            ["site"],
            registry=registry,
        )
        for site in CONFLICT_SITES:
            self.conflicts.labels(site)
        self.created = Counter(
            "llmsafespaces_workspaces_created_total",
            "Workspaces that became Active (every activation), by runtime and security level.",
            kinds,
            registry=registry,
        )
        self.deleted = Counter(
            "llmsafespaces_workspaces_deleted_total",
            "Workspaces whose deletion finished, by runtime and security level.",
            kinds,
            registry=registry,
        )
        self.transitions = Counter(
            "llmsafespaces_workspace_phase_transitions_total",
            "Workspace phase changes, by the phase left and the phase entered.",
            ["from_phase", "to_phase"],
            registry=registry,
        )
        self.create_duration = Histogram(
            "llmsafespaces_workspace_create_duration_seconds",
            "Seconds from a Workspace's request to its first time Active.",
            ["has_packages", "has_init_script"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.resume_duration = Histogram(
            "llmsafespaces_workspace_resume_duration_seconds",
            "Seconds from a resume request to the Workspace being Active again.",
            ["resume_type"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.setup_duration = Histogram(
            "llmsafespaces_workspace_init_container_duration_seconds",
            "Seconds the workspace-setup init container (packages, init script) ran, for "
            "each pod that made its Workspace Active.",
            buckets=SETUP_BUCKETS,
            registry=registry,
        )

    def transition(self, workspace: Obj, from_phase: str, to_phase: str) -> None:
        """The status write moved ``workspace`` from ``from_phase`` ("" when it had none) to
        ``to_phase``; an Active arrival also counts as created."""
        left, entered = _phase(from_phase or "Pending"), _phase(to_phase)
        if left == entered:
            return
        self.transitions.labels(left, entered).inc()
        if to_phase == fleet.ACTIVE:
            self.created.labels(*_kind(workspace)).inc()

    def first_active(
        self, workspace: Obj, requested: datetime.datetime, now: datetime.datetime
    ) -> None:
        """``workspace`` is Active for the first time; ``requested`` is when it was asked for
        (its creation, or the API's request time when that is earlier and plausible)."""
        spec = WorkspaceSpec.of(workspace.get("spec"))
        labels = (_flag(spec.packages), _flag(spec.init_script))
        self.create_duration.labels(*labels).observe(max(0.0, (now - requested).total_seconds()))

    def resumed(
        self,
        requested: datetime.datetime,
        now: datetime.datetime,
        *,
        first: bool,
    ) -> None:
        """A resumed Workspace is Active again; ``first``: its first resume."""
        resume_type = "first_resume" if first else "subsequent_resume"
        self.resume_duration.labels(resume_type).observe(
            max(0.0, (now - requested).total_seconds())
        )

    def status_written(
        self,
        workspace: Obj,
        old: Obj,
        new: Obj,
        now: datetime.datetime,
        *,
        setup_seconds: float | None = None,
    ) -> None:
        """A pass wrote status ``new`` over ``old`` for ``workspace``: its phase change, and the
        creation or resume it completed (measured from the anchors ``old`` holds);
        ``setup_seconds``: how long the serving pod's ``workspace-setup`` ran."""
        before, after = WorkspaceStatus.of(old).phase, WorkspaceStatus.of(new).phase
        self.transition(workspace, before, after)
        if after != fleet.ACTIVE or before == fleet.ACTIVE:
            return
        if setup_seconds is not None:
            self.setup_duration.observe(setup_seconds)
        resumed, pending = parse_time(old.get("resumedAt")), parse_time(old.get("pendingAt"))
        if resumed is not None:
            self.resumed(resumed, now, first=old.get("resumeCount") == 1)
        elif pending is not None:
            self.first_active(workspace, pending, now)

    def write_conflict(self, site: str) -> None:
        """A write at ``site`` (one of ``CONFLICT_SITES``) was answered with a conflict."""
        self.conflicts.labels(site).inc()

    def deletion_finished(self, workspace: Obj) -> None:
        """``workspace``'s finalizer was removed: it is gone."""
        self.deleted.labels(*_kind(workspace)).inc()


def _kind(workspace: Obj) -> tuple[str, str]:
    return fleet.runtime_label(workspace), fleet.security_level_label(workspace)
