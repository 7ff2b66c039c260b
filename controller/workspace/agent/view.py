"""What the controller knows about one workspace's agent: the latest liveness verdict, the
latest deep status and the drain bookkeeping, as the agent scheduler (``agent_scheduler``)
keeps them. Pure values.

Liveness verdicts, and which of them count towards the restart after ``RESTART_AFTER``
consecutive failures:

- ``ok``: healthz answered 200 with ``"healthy": true``;
- ``unreachable`` (counts): no answer (refused, reset, timed out);
- ``unhealthy`` (counts): agentd said ``"healthy": false``, or answered 5xx;
- ``unreadable`` (never counts): an answer that is not a health report (not JSON, no boolean
  ``healthy``, over the size cap, or another status code). A pod is never restarted for it:
  restarting cannot fix a report format this controller does not read (an agentd release
  ahead of it), and doing so would cycle every workspace of the fleet. It is never silent
  either: the Workspace shows ``AgentHealthy=Unknown/HealthReportUnreadable`` naming what was
  wrong, and ``llmsafespaces_workspace_health_check_failures_total{outcome="unreadable"}``
  counts it for the alert that says the fleet's reports cannot be read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from controller.workspace.agent.answers import Health, Status

Verdict = Literal["ok", "unreachable", "unhealthy", "unreadable"]
COUNTED: Final[frozenset[Verdict]] = frozenset({"unreachable", "unhealthy"})
RESTART_AFTER: Final = 3
"""Consecutive counted liveness failures after which the pod is replaced."""


@dataclass(frozen=True)
class Liveness:
    """One healthz outcome."""

    verdict: Verdict
    detail: str = ""
    """Why it is not ``ok``, in a few words (never a token, never the body)."""
    health: Health | None = None
    """The decoded report (``ok`` and ``unhealthy`` answers that carried one)."""


@dataclass(frozen=True)
class AgentView:
    """The agent of one Active workspace pod, as last observed."""

    liveness: Liveness | None = None
    """The latest healthz outcome; None before the first check."""
    failures: int = 0
    """Consecutive counted liveness failures (reset by an ``ok`` or ``unreadable`` answer)."""
    status: Status | None = None
    """The latest deep status that was read (kept through failed reads: they are
    informational only)."""
    status_problem: str = ""
    """Why the latest deep status read failed ("" when it succeeded or none ran yet)."""
    status_epoch: int = 0
    """The drain epoch the latest deep status read started in (``agent_scheduler.drain``)."""
    busy_changes: int = 0
    """How many deep status reads found the busy sessions (or their context use) changed
    since the read before: a drain counts progress by it, so a change and its reversal
    between two reconciles still count."""
