"""Workspaces counted by phase, by runtime and by condition. Pure.

One definition for every place that counts Workspaces: the controller's scrape-time gauges
(``llmsafespaces_workspaces``, ``llmsafespaces_workspaces_running``,
``llmsafespaces_workspace_conditions``), ``wspin status`` and the fleet dashboard, so the three
always show the same numbers; ``kubectl get workspaces`` prints the same ``.status.phase``.

Every label value is drawn from a bounded set whatever a Workspace says, so a hostile or
broken object cannot grow the number of series: phases are the CRD's enum (anything else is
``Unknown``), runtimes are RuntimeEnvironment names (which the Workspace validator admits only
from the catalogue) or ``image``, condition types are the ones the controller writes, and
reasons are CamelCase words of at most 64 characters, at most ``MAX_REASONS`` per condition
and status (the rest are counted under ``Other``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, Literal, get_args

from wspin.core.objects import Obj
from wspin.core.owners import record_of
from wspin.core.workspace import WorkspaceSpec, WorkspaceStatus

Phase = Literal[
    "Pending",
    "Creating",
    "Active",
    "Suspending",
    "Suspended",
    "Resuming",
    "Terminating",
    "Terminated",
    "Failed",
]
"""The Workspace CRD's ``status.phase`` enum, in lifecycle order."""

PHASES: Final[tuple[str, ...]] = get_args(Phase)

UNKNOWN: Final = "Unknown"
ACTIVE: Final = "Active"

CONDITIONS: Final[tuple[str, ...]] = (
    "AgentdVerified",
    "OpencodeVerified",
    "CredentialsStaged",
    "CredentialStale",
    "CredentialRejected",
    "EgressPolicy",
    "BootReady",
    "RecoveryExhausted",
    "Ready",
)
"""The Workspace conditions the controller writes and the gauge reports."""

CONDITION_STATUSES: Final[tuple[str, ...]] = ("True", "False", "Unknown")
MAX_REASONS: Final = 16
OTHER: Final = "Other"
_REASON = re.compile(r"^[A-Z][A-Za-z0-9]{0,63}$")
_RUNTIME_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")
SECURITY_LEVELS: Final = frozenset({"standard", "high", "custom"})


def phase_of(workspace: Obj) -> str:
    """The Workspace's phase as counted: ``status.phase``; Pending before the controller has
    written one (it treats an empty phase as Pending); Unknown for a value outside the enum."""
    phase = WorkspaceStatus.of(workspace.get("status")).phase or "Pending"
    return phase if phase in PHASES else UNKNOWN


def phase_counts(workspaces: Iterable[Obj]) -> dict[str, int]:
    """Workspaces per phase; every phase of the enum is present (0 when none)."""
    counts = dict.fromkeys(PHASES, 0)
    for workspace in workspaces:
        phase = phase_of(workspace)
        counts[phase] = counts.get(phase, 0) + 1
    return counts


def runtime_label(workspace: Obj) -> str:
    """``spec.runtime`` when it names a RuntimeEnvironment, ``image`` for an image reference,
    ``none`` when unset, ``other`` for anything else."""
    runtime = WorkspaceSpec.of(workspace.get("spec")).runtime
    if not runtime:
        return "none"
    if "/" in runtime or "@" in runtime:
        return "image"
    return runtime if _RUNTIME_NAME.match(runtime) else "other"


def security_level_label(workspace: Obj) -> str:
    """``spec.securityLevel`` when it is one of LLMSafeSpaces' levels, else ``none``."""
    level = WorkspaceSpec.of(workspace.get("spec")).security_level
    return level if level in SECURITY_LEVELS else "none"


def owner_user_id(workspace: Obj) -> str:
    """The user a Workspace is metered and billed to: the user admission verified and recorded
    (``wspin.core.owners``), never ``spec.owner`` as it stands, which a tenant writes; "" for a
    Workspace without a record (it predates the record, or no admission has seen it)."""
    record = record_of(workspace)
    return record.user_id if record is not None else ""


def running_counts(workspaces: Iterable[Obj]) -> dict[tuple[str, str], int]:
    """Active Workspaces per (runtime, security level)."""
    counts: dict[tuple[str, str], int] = {}
    for workspace in workspaces:
        if phase_of(workspace) == ACTIVE:
            key = (runtime_label(workspace), security_level_label(workspace))
            counts[key] = counts.get(key, 0) + 1
    return counts


def condition_counts(workspaces: Iterable[Obj]) -> dict[tuple[str, str, str], int]:
    """Workspaces per (condition, status, reason) for the conditions in ``CONDITIONS``.

    Reasons that are not CamelCase words, and every reason past the ``MAX_REASONS`` most
    frequent of a (condition, status), are counted as ``Other``."""
    raw: dict[tuple[str, str], dict[str, int]] = {}
    for workspace in workspaces:
        for condition in (workspace.get("status") or {}).get("conditions") or []:
            if not isinstance(condition, dict) or condition.get("type") not in CONDITIONS:
                continue
            status = condition.get("status")
            if status not in CONDITION_STATUSES:
                status = "Unknown"
            reason = condition.get("reason")
            reason = reason if isinstance(reason, str) and _REASON.match(reason) else OTHER
            reasons = raw.setdefault((condition["type"], status), {})
            reasons[reason] = reasons.get(reason, 0) + 1
    counts: dict[tuple[str, str, str], int] = {}
    for (type_, status), reasons in raw.items():
        named = sorted(
            ((r, n) for r, n in reasons.items() if r != OTHER), key=lambda item: (-item[1], item[0])
        )
        for index, (reason, count) in enumerate(named):
            key = (type_, status, reason if index < MAX_REASONS else OTHER)
            counts[key] = counts.get(key, 0) + count
        if OTHER in reasons:
            key = (type_, status, OTHER)
            counts[key] = counts.get(key, 0) + reasons[OTHER]
    return counts
