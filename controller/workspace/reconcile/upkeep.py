"""What the controller does on its own for a Workspace it runs: it watches the agent (health
restarts, the agent's status), drains sessions before the recycles it starts, suspends idle
and expired pods, and deletes Workspaces kept suspended past their TTL.

The decisions are pure (``agent_status``, ``drain``, ``idle``); the functions here, called by
the phase handlers with the pass's ``ReconcileDeps``, put what they decide in the ``Plan``: the
pod to delete, the volume or Workspace to delete past its TTL, the status to write once, its
Events, its deadline. The one write made here is the user's force-recycle marker, removed
before the pod it releases (a marker that cannot be removed keeps both). Health itself is
read by the fleet's one ``AgentScheduler``; a pass only registers the pod and reads what is
known.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from controller.types import Obj, ObjectKey
from controller.workspace.agent import drain
from controller.workspace.agent.metrics import USER_FORCED, DrainReason
from controller.workspace.agent.report import AgentReport
from controller.workspace.agent.view import RESTART_AFTER
from controller.workspace.pod.builder import ANNOTATION_RESTART_GENERATION
from controller.workspace.pod.credentials import WorkspaceCredentials
from controller.workspace.pod.facts import PodFacts
from controller.workspace.pod.names import names
from controller.workspace.pod.phase import recycling
from controller.workspace.pod.storage import claim_conflict
from controller.workspace.reconcile import idle
from controller.workspace.reconcile.deadlines import MIN_REQUEUE
from controller.workspace.reconcile.deps import ReconcileDeps
from controller.workspace.reconcile.plan import (
    DeleteClaims,
    DeletePod,
    DeleteWorkspace,
    Notice,
    Plan,
)
from wspin.core.errors import KubeAPIError
from wspin.core.logs import fields
from wspin.core.workspace import Workspace, WorkspaceStatus

log = logging.getLogger("controller.workspace")

AGENT_RESTARTED = "AgentRestarted"
AUTO_SUSPEND_REASONS = (idle.IDLE, idle.LIFETIME)


@dataclass
class Gate:
    """Whether a recycle waits for sessions this pass, and what the drain has to say."""

    hold: bool = False
    due: float | None = None
    notices: list[Notice] = field(default_factory=list)


# -- session drain -----------------------------------------------------------------------


async def hold_recycle(
    deps: ReconcileDeps, ws: Obj, pod: Obj, facts: PodFacts, previous: str, *, untrusted: bool
) -> Gate:
    """Whether the recycle of ``pod`` waits for its sessions (see ``drain``)."""
    gate = Gate()
    if previous != "Active" or not facts.serving:
        return gate  # only a pod that serves has sessions to keep
    reason = drain.reason_of(pod, ws, untrusted)
    where = str(ObjectKey.of(ws))
    if reason == "restart_generation" and drain.user_forced(ws):
        return await _user_forced(deps, ws, facts, gate)
    view = deps.agents.view(ws) if deps.agents is not None else None
    if deps.agents is None or view is None:
        return gate  # no agent is read in this pod: nothing to ask
    now = deps.clock()
    window = deps.drains.get(ws, facts.ip)
    if window is None:
        epoch = deps.agents.drain(ws) or 0
        window = drain.Window(facts.ip, now, epoch, now, view.busy_changes)
    stall = deps.settings.agent.drain_stall_bound
    verdict, window = drain.decide(window, view, now, stall)
    if isinstance(verdict, drain.Hold):
        deps.drains.put(ws, window, stall_bound=stall)
        gate.hold, gate.due = True, verdict.after
        if verdict.announce:
            _count(deps, reason, "deferred")
            gate.notices.append(
                Notice(
                    "Normal",
                    drain.DEFERRED,
                    f"recycling the pod ({reason}) waits for {verdict.busy} busy agent "
                    f"session(s) to end; it goes ahead after "
                    f"{stall:.0f} s without progress",
                )
            )
        return gate
    deps.drains.close(ws)
    deps.agents.end_drain(ws)
    waited = (now - window.started).total_seconds()
    if deps.agent_metrics is not None:
        deps.agent_metrics.drain_duration.labels(reason, verdict.outcome).observe(waited)
    if verdict.outcome == "failed_open":
        _count(deps, reason, "failed_open")
        gate.notices.append(
            Notice(
                "Normal",
                drain.FAILED_OPEN,
                f"recycling the pod ({reason}) without a drain: agentd could not be asked "
                f"about its sessions ({verdict.detail})",
            )
        )
    elif verdict.outcome == "forced":
        _count(deps, reason, "forced")
        gate.notices.append(
            Notice(
                "Warning",
                drain.FORCED,
                f"recycling the pod ({reason}) with busy sessions: {verdict.detail} "
                f"(bound {stall:.0f} s)",
            )
        )
        log.warning("session drain forced", extra=fields(workspace=where, reason=reason))
    return gate


async def _user_forced(deps: ReconcileDeps, ws: Obj, facts: PodFacts, gate: Gate) -> Gate:
    """The user consented to cut sessions for this bump: the marker goes first, then the
    pod; a marker that cannot be removed keeps both."""
    value = drain.force_marker(ws) or ""
    where = str(ObjectKey.of(ws))
    try:
        cleared = await drain.clear_marker(deps.kube, ws, value)
    except KubeAPIError as err:
        log.info(
            "force-recycle marker not cleared yet; retrying",
            extra=fields(workspace=where, error=err.message),
        )
        cleared = None
    if cleared is None:
        gate.hold, gate.due = True, MIN_REQUEUE
        return gate
    window = deps.drains.close(ws)
    if deps.agents is not None:
        deps.agents.end_drain(ws)
    if deps.agent_metrics is not None:
        deps.agent_metrics.drain_forced.labels(USER_FORCED).inc()
        waited = (deps.clock() - window.started).total_seconds() if window else 0.0
        deps.agent_metrics.drain_duration.labels(USER_FORCED, "user_forced").observe(waited)
    log.info("force-recycle requested by the user", extra=fields(workspace=where))
    gate.notices.append(
        Notice(
            "Normal",
            drain.USER_FORCED,
            f"recycling the pod for restartGeneration {value} at once, as asked "
            f"({drain.FORCE_RECYCLE}); busy sessions are not waited for",
        )
    )
    return gate


def _count(deps: ReconcileDeps, reason: DrainReason, what: str) -> None:
    metrics = deps.agent_metrics
    if metrics is None:
        return
    counter = {
        "deferred": metrics.drain_deferred,
        "forced": metrics.drain_forced,
        "failed_open": metrics.drain_failed_open,
    }[what]
    counter.labels(reason).inc()


# -- the Active pod ----------------------------------------------------------------------


async def upkeep(
    deps: ReconcileDeps,
    ws: Obj,
    pod: Obj,
    facts: PodFacts,
    plan: Plan,
    credentials: WorkspaceCredentials | str | None,
    gate: Gate,
) -> Plan | idle.AutoSuspend:
    """Fold the drain, the agent and the Workspace's own deadlines into ``plan``; an
    ``AutoSuspend`` when the Workspace is due to be suspended, or the restart's plan
    when the agent failed its health checks."""
    plan.notices += gate.notices
    plan.due(gate.due)
    if gate.hold:  # the generation is observed once the pod is actually replaced
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        held = annotations.get(ANNOTATION_RESTART_GENERATION, "0")
        plan.restart_generation = int(held) if str(held).isdigit() else 0
    if plan.phase != "Active":
        if deps.agents is not None:
            deps.agents.forget(ws)
        return plan
    due = idle.active_deadline(ws, deps.clock())
    if isinstance(due, idle.AutoSuspend):
        if deps.agent_metrics is not None:
            deps.agent_metrics.auto_suspensions.labels(due.metric).inc()
        return due
    plan.due(due)
    if deps.agents is None:
        return plan
    if isinstance(credentials, WorkspaceCredentials):
        view = deps.agents.track(ws, pod, credentials.admin_token)
    else:  # a pod held for a drain keeps being read with the token it was built with
        view = deps.agents.view(ws)
    if view is None:
        return plan
    if view.failures >= RESTART_AFTER:
        return _restart(deps, ws, pod, facts, view.failures)
    plan.agent = AgentReport(view)
    return plan


def _restart(deps: ReconcileDeps, ws: Obj, pod: Obj, facts: PodFacts, failures: int) -> Plan:
    """Replace a pod whose agent failed ``failures`` liveness checks in a row (no drain:
    an agent that does not answer has no session to finish)."""
    why = f"agentd failed {failures} health checks in a row"
    log.warning("restarting workspace pod", extra=fields(workspace=str(ObjectKey.of(ws))))
    if deps.agents is not None:
        deps.agents.forget(ws)
    deps.drains.close(ws)
    if deps.agent_metrics is not None:
        deps.agent_metrics.restarts.inc()
    plan = Plan.observed(recycling("Active", why), pod_name=facts.name, restarted=True)
    plan.writes.append(DeletePod(pod))
    plan.agent = AgentReport(restarted=True)
    plan.notices.append(Notice("Warning", AGENT_RESTARTED, f"{why}; the pod is replaced"))
    return plan


def suspended_notice(auto: idle.AutoSuspend) -> Notice:
    return Notice("Normal", auto.reason, f"suspending the workspace: {auto.message}")


# -- Suspended ---------------------------------------------------------------------------


def expire(deps: ReconcileDeps, ws: Obj, plan: Plan) -> Plan:
    """End a Workspace kept Suspended past ``spec.ttlSecondsAfterSuspended``: its volume
    is deleted and it is kept as Terminated (``--workspace-ttl-action=terminate``, the
    default: the API and its users still see what became of it), or the Workspace itself
    is deleted (``delete``; its deletion then runs as any other). Otherwise come back when
    it is due."""
    left = idle.ttl_left(ws, deps.clock())
    if left is None:
        return plan
    if left > 0:
        plan.due(left)
        return plan
    ttl = Workspace.of(ws).spec.ttl_seconds_after_suspended
    said = f"suspended longer than spec.ttlSecondsAfterSuspended ({ttl} s)"
    if deps.settings.ttl_action == "delete":
        expired = Plan("Terminating", reason=idle.TTL_EXPIRED, detail=f"{said}; deleted")
        expired.writes.append(DeleteWorkspace())
    else:
        message = f"{said}; its volume is deleted and the workspace is kept as Terminated"
        expired = Plan("Terminated", reason=idle.TTL_EXPIRED, detail=message)
        expired.writes.append(DeleteClaims(own_claims(deps, ws)))
    if deps.agent_metrics is not None:
        deps.agent_metrics.ttl_expirations.inc()
    log.info("workspace expired", extra=fields(workspace=str(ObjectKey.of(ws))))
    expired.notices.append(Notice("Normal", idle.TTL_EXPIRED, expired.detail))
    return expired


def own_claims(deps: ReconcileDeps, ws: Obj) -> tuple[Obj, ...]:
    """The Workspace's own claims (by either name it may have), never another's, that are not
    being deleted already."""
    key = ObjectKey.of(ws)
    owned = names(ws)
    found: list[Obj] = []
    for name in dict.fromkeys((owned.pvc, owned.legacy_pvc)):
        pvc = deps.pvcs.get(ObjectKey(key.namespace, name))
        if pvc is None or (pvc.get("metadata") or {}).get("deletionTimestamp"):
            continue
        if claim_conflict(pvc, ws, legacy_before=deps.writes.legacy_before) is None:
            found.append(pvc)
    return tuple(found)


async def clear_spent_marker(deps: ReconcileDeps, ws: Obj, observed: int | None) -> None:
    """Remove a force-recycle marker whose generation the status already observed."""
    value = drain.spent_marker(ws, observed)
    if value is None:
        return
    try:
        await drain.clear_marker(deps.kube, ws, value)
    except KubeAPIError as err:
        log.info(
            "spent force-recycle marker not cleared; the next pass retries",
            extra=fields(workspace=str(ObjectKey.of(ws)), error=err.message),
        )


def kept_reason(status: Obj) -> tuple[str, str] | None:
    """The automatic suspend's reason and message a suspended Workspace keeps showing."""
    seen = WorkspaceStatus.of(status)
    if seen.reason in AUTO_SUSPEND_REASONS:
        return seen.reason, seen.message
    return None
