"""What one pass over a Workspace decided: the writes to make, the status to write and what
follows the write.

Every phase handler returns one ``Plan``; ``act`` makes its writes (``Write``), the reconciler
turns it into a single status write (``record``), then runs what must come after the status
is committed (clearing a consumed ``spec.suspend``, Events, raising a staging error).
``Notice`` is an Event queued for after the write.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from controller.types import Obj
from controller.workspace.agent.report import AgentReport
from controller.workspace.pod.credentials import WorkspaceCredentials
from controller.workspace.pod.facts import PodFacts
from controller.workspace.pod.phase import Observation
from controller.workspace.recovery import verify
from controller.workspace.recovery.decision import Assessment
from wspin.core.fleet import Phase


@dataclass(frozen=True)
class DeletePod:
    """Delete the Workspace's pod with the termination grace."""

    pod: Obj


@dataclass(frozen=True)
class RestoreSecret:
    """Write the workspace credentials Secret again (the kubelet reports it missing)."""

    credentials: WorkspaceCredentials


@dataclass(frozen=True)
class DeleteClaims:
    """Delete these claims of the Workspace's own (its volume, past its TTL)."""

    claims: tuple[Obj, ...]


@dataclass(frozen=True)
class DeleteWorkspace:
    """Delete the Workspace itself (past its TTL, with ``--workspace-ttl-action=delete``)."""


Write = DeletePod | RestoreSecret | DeleteClaims | DeleteWorkspace
"""A write a pass decided on, made by ``act`` before the status is written."""


@dataclass(frozen=True)
class Notice:
    """An Event to record once the status is written."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass
class Plan:
    phase: Phase
    ready_reason: str = ""
    """The Ready condition's reason ("" = the phase's own)."""
    detail: str = ""
    """The Ready condition's message ("" = the phase's own)."""
    reason: str = ""
    """A cause worth ``status.reason``/``message`` (an organisation's suspension, a missing
    runtime, a pod that cannot be built); it is the Ready reason too."""
    failure_reason: str = ""
    """``status.failureReason`` this pass starts ("" keeps what the status has)."""
    pod: PodFacts | None = None
    """The pod observed this pass (its IP and tag go to status when the phase is Active)."""
    pod_name: str = ""
    """The pod that exists or was just created for the Workspace ("" = none)."""
    claim: str = ""
    """The PVC the pod mounts (``status.pvcName``)."""
    claim_uid: str = ""
    """The uid of the claim ``claim`` once it is in the cache (``status.pvcUID``)."""
    restart_generation: int | None = None
    """The ``spec.restartGeneration`` the Workspace's pod is (being) built for."""
    restarted: bool = False
    """The controller replaced the pod (``status.restartCount`` +1)."""
    consume: bool | None = None
    """The ``spec.suspend`` value this pass acted on, cleared once the status is written."""
    requeue: float | None = None
    """Seconds until the earliest deadline this pass found (``due``); None: wait for an event."""
    conditions: list[Obj] = field(default_factory=list)
    """Conditions beyond Ready (verification, relay staging, egress)."""
    remove: tuple[str, ...] = ()
    """Condition types to drop (causes that went away)."""
    failures: list[tuple[verify.VerifyFailure, str]] = field(default_factory=list)
    """Verify failures starting a new episode, with the episode's name (the pod and the
    failure): reported once the status records them."""
    error: Exception | None = None
    """Raised once the status is written (relay staging incomplete)."""
    staging_due: float | None = None
    """Relay staging's own deadline (seconds)."""
    recovery: Assessment | None = None
    """The recovery decision of this pass (``healing``): the record to write and what to
    report once it is written; None: the record stays as it is."""
    staged: bool = False
    """The staging pass already ran for this reconcile (before the pod was built), or must
    not run (a namespace no workspace may use)."""
    agent: AgentReport | None = None
    """What the Active pod's agent reports, or that it was replaced for failing its health
    checks (``agent_status``)."""
    notices: list[Notice] = field(default_factory=list)
    """Events to record after the status write (drains, automatic suspends, restarts)."""
    writes: list[Write] = field(default_factory=list)
    """The writes this pass decided on, made in order before the status write (``act``)."""

    def due(self, seconds: float | None) -> None:
        """Come back within ``seconds`` (None: no deadline)."""
        if seconds is not None and (self.requeue is None or seconds < self.requeue):
            self.requeue = seconds

    @classmethod
    def observed(cls, seen: Observation, **fields: Any) -> Plan:
        """A plan from a pod observation (``lifecycle.observe``)."""
        return cls(
            seen.phase,
            ready_reason=seen.reason,
            detail=seen.message,
            failure_reason=seen.failure_reason,
            **fields,
        )
