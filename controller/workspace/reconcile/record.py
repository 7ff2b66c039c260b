"""The Workspace status a pass writes: phase, Ready, and the fields the API routes by. Pure.

One function, ``next_status``, turns the status found and a pass's ``Plan`` into the status
to write; the reconciler sends the difference as one merge patch (nothing when equal). The
fields and when they change:

- ``podName``/``podNamespace``: the pod that exists or was created; gone when Suspended,
  Failed or Terminated.
- ``podIP``/``endpoint`` (``http://<podIP>:4096``, opencode's port): only while Active,
  withdrawn on every other phase, so a reader that sees them may route to the pod.
- ``imageTag``: the workspace image's tag, set while Active, never cleared.
- ``startTime``: when the Workspace became Active on its current pod; a pod that is unready
  for a while and ready again keeps it, a new pod gets a new one.
- ``restartCount``: +1 each time the controller replaces the pod (a new ``restartGeneration``,
  credentials it cannot vouch for); ``observedRestartGeneration`` the generation built for;
  ``credentialsRotation`` the highest admin-token rotation built (``credentials``), never down.
- ``suspendedAt``: when the Workspace became Suspended; cleared when it leaves Suspended.
- ``failureReason``: why the pod was lost or cannot be built (``lifecycle``); cleared once the
  Workspace is Active, suspended or deleted again.
- ``reason``/``message``: a cause the user should read (a suspended organisation, a missing
  runtime, a pod that cannot be built, a pod that fails or does not start).
- the recovery record (``consecutiveFailures``, ``lastFailureClass``, ``lastFailureAt``,
  ``nextRetryAt``, ``lastStableAt``, ``recoveryAttempts``, ``lastFailedPod``): the pass's
  decision (``recovery``), cleared when the Workspace is stopped.
- ``pendingAt``, ``resumedAt``, ``resumeCount``: what creation and resume times are measured
  from (``anchors``).

Conditions are the toolkit's: re-stating one is a no-op and never causes a write.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from controller.toolkit.conditions import condition, remove_conditions, set_conditions
from controller.types import Obj
from controller.workspace.pod.credentials import STATUS_ROTATION
from controller.workspace.pod.phase import POD_BUILD_FAILED, served_before
from controller.workspace.pod.probes import OPENCODE_PORT
from controller.workspace.reconcile.anchors import anchor
from controller.workspace.reconcile.plan import Plan
from controller.workspace.recovery.policy import apply, settle, spec_digest
from wspin.core.clock import format_time
from wspin.core.fleet import Phase
from wspin.core.workspace import (
    FAILURE_REASON,
    OBSERVED_RESTART_GENERATION,
    PVC_NAME,
    PVC_UID,
    SUSPENDED_AT,
    WorkspaceStatus,
)

READY: Final = "Ready"

_READY: Final[dict[str, tuple[str, str]]] = {
    "Pending": ("PodPending", "waiting for the workspace pod to be scheduled"),
    "Creating": ("PodStarting", "workspace pod is starting"),
    "Active": ("PodReady", "workspace pod is ready"),
    "Suspending": ("Suspending", "stopping the workspace pod; the volume is kept"),
    "Suspended": ("Suspended", "suspended: no pod, the volume is kept"),
    "Resuming": ("Resuming", "resuming: a new workspace pod is being created"),
    "Terminating": ("Terminating", "workspace is being deleted"),
    "Terminated": ("Terminated", "the workspace pod is gone"),
    "Failed": (POD_BUILD_FAILED, "the workspace pod cannot be built"),
}
_WITHOUT_POD: Final = ("Suspended", "Failed", "Terminated")
_FAILURE_SETTLED: Final = (
    "Active",
    "Suspending",
    "Suspended",
    "Resuming",
    "Terminating",
    "Terminated",
)


def ready_condition(plan: Plan, generation: int) -> Obj:
    """The Ready condition: True only while Active (the pod Running, on its IP, every
    container ready) with no cause to report."""
    default_reason, default_message = _READY[plan.phase]
    if plan.phase == "Active" and not plan.reason:
        return condition(READY, "True", default_reason, plan.detail or default_message, generation)
    reason = plan.reason or plan.ready_reason or default_reason
    return condition(READY, "False", reason, plan.detail or default_message, generation)


def endpoint(ip: str) -> str:
    """opencode's URL on the pod IP (bracketed for IPv6)."""
    host = f"[{ip}]" if ":" in ip else ip
    return f"http://{host}:{OPENCODE_PORT}"


def next_status(old: Obj, plan: Plan, ws: Obj, now: datetime) -> Obj:
    """The status to write after a pass that decided ``plan``."""
    meta = ws["metadata"]
    generation = int(meta.get("generation") or 0)
    phase: Phase = plan.phase
    seen = WorkspaceStatus.of(old)
    conditions = set_conditions(
        seen.conditions,
        [ready_condition(plan, generation), *plan.conditions],
        format_time(now),
    )
    new: Obj = {
        **old,
        "phase": phase,
        "observedGeneration": generation,
        "conditions": remove_conditions(conditions, plan.remove),
    }
    for key in ("reason", "message", "podIP", "endpoint"):
        new.pop(key, None)
    if plan.reason:
        new["reason"], new["message"] = plan.reason, plan.detail
    if plan.claim:
        new[PVC_NAME] = plan.claim
    if plan.claim_uid:
        new[PVC_UID] = plan.claim_uid
    if phase in _WITHOUT_POD:
        new.pop("podName", None)
        new.pop("podNamespace", None)
    elif plan.pod_name:
        new["podName"], new["podNamespace"] = plan.pod_name, meta.get("namespace", "")
    pod = plan.pod
    if phase == "Active" and pod is not None and pod.ip:
        new["podIP"], new["endpoint"] = pod.ip, endpoint(pod.ip)
        if pod.image_tag:
            new["imageTag"] = pod.image_tag
        if seen.phase != "Active" and not served_before(old, pod):
            new["startTime"] = format_time(now)
    _restarts(seen, plan, new)
    if phase != "Suspended":
        new.pop(SUSPENDED_AT, None)
    elif seen.phase != "Suspended" or SUSPENDED_AT not in old:
        new[SUSPENDED_AT] = format_time(now)
    failure = _failure_reason(seen.failure_reason, plan)
    if failure:
        new[FAILURE_REASON] = failure
    else:
        new.pop(FAILURE_REASON, None)
    decided = plan.recovery.state if plan.recovery is not None else None
    apply(new, settle(old, generation, decided, phase, spec_digest(ws.get("spec"))))
    anchor(old, new, ws, now)
    return new


def _restarts(old: WorkspaceStatus, plan: Plan, new: Obj) -> None:
    count = old.restart_count
    recorded = old.observed_restart_generation
    if plan.restart_generation is not None:
        new[OBSERVED_RESTART_GENERATION] = plan.restart_generation
        # The admin token's rotation, never down (credentials.credentials_rotation).
        rotation = max(plan.restart_generation, old.credentials_rotation)
        if rotation:
            new[STATUS_ROTATION] = rotation
        if recorded is not None and recorded != plan.restart_generation:
            count += 1
    if plan.restarted:
        count += 1
    new["restartCount"] = count


def _failure_reason(old: str, plan: Plan) -> str:
    if plan.failure_reason:
        return plan.failure_reason
    if plan.phase in _FAILURE_SETTLED:
        return ""
    if old == POD_BUILD_FAILED and plan.phase != "Failed":
        return ""
    return old
