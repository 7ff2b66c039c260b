"""Workspace status: phases, conditions and the pod facts they come from. Pure.

Conditions follow the Kubernetes convention (type, status, reason, message,
lastTransitionTime, observedGeneration); ``lastTransitionTime`` moves only when ``status``
changes, so re-stating a condition is a no-op and never causes a status write.
"""

from __future__ import annotations

from typing import Any, Final, Literal

Obj = dict[str, Any]

Phase = Literal["Pending", "Creating", "Active", "Suspending", "Suspended", "Terminating", "Failed"]
ConditionStatus = Literal["True", "False", "Unknown"]

READY: Final = "Ready"


def condition(
    type_: str, status: ConditionStatus, reason: str, message: str = "", generation: int = 0
) -> Obj:
    """A condition without its transition time (``set_condition`` stamps it)."""
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
    }


def find_condition(conditions: list[Obj], type_: str) -> Obj | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def set_condition(conditions: list[Obj], new: Obj, now: str) -> list[Obj]:
    """``conditions`` with ``new`` in place of its type; the transition time is kept when the
    status did not change, else set to ``now``. Other types keep their order."""
    old = find_condition(conditions, new["type"])
    stamped = dict(new)
    if old is not None and old.get("status") == new["status"] and old.get("lastTransitionTime"):
        stamped["lastTransitionTime"] = old["lastTransitionTime"]
    else:
        stamped["lastTransitionTime"] = now
    if old is None:
        return [*conditions, stamped]
    return [stamped if c is old else c for c in conditions]


def pod_ready(pod: Obj) -> bool:
    """Running with the Ready condition True (the kubelet's view, probes included)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    ready = find_condition(status.get("conditions") or [], "Ready")
    return ready is not None and ready.get("status") == "True"


def pod_terminal(pod: Obj) -> bool:
    """Succeeded or Failed: a workspace pod (restartPolicy Always) only gets here by eviction
    or node loss, and never comes back; it has to be replaced."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_deleting(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def running_phase(pod: Obj | None, previous: str) -> Phase:
    """Pending until the pod is scheduled, Creating while it starts, Active once ready.

    A pod that stops being ready (a restart, a failed probe) keeps an Active workspace
    Active, and a pod being replaced keeps the workspace Creating rather than Pending, also
    while the replacement waits to be scheduled: the phase never moves backwards.
    """
    if pod is None or pod_deleting(pod):
        return "Creating" if previous in ("Creating", "Active") else "Pending"
    if pod_ready(pod) or previous == "Active":
        return "Active"
    if (pod.get("spec") or {}).get("nodeName") or previous == "Creating":
        return "Creating"
    return "Pending"


def ready_condition(phase: Phase, generation: int, detail: str = "") -> Obj:
    """The Ready condition each phase implies."""
    if phase == "Active":
        return condition(READY, "True", "PodReady", "workspace pod is ready", generation)
    reasons: dict[str, tuple[str, str]] = {
        "Pending": ("PodPending", "waiting for the workspace pod to be scheduled"),
        "Creating": ("PodStarting", "workspace pod is starting"),
        "Suspending": ("Suspending", "stopping the workspace pod; the volume is kept"),
        "Suspended": ("Suspended", "suspended: no pod, the volume is kept"),
        "Terminating": ("Terminating", "workspace is being deleted"),
        "Failed": ("PodBuildFailed", "the workspace pod cannot be built"),
    }
    reason, message = reasons[phase]
    return condition(READY, "False", reason, detail or message, generation)


def status_patch(old: Obj, new: Obj) -> Obj | None:
    """A merge patch turning status ``old`` into ``new``, or None when nothing changed.

    Keys the controller no longer sets become null (merge-patch deletion); keys it never
    manages (relay staging bookkeeping) are left alone because ``new`` starts from ``old``.
    """
    if old == new:
        return None
    patch: Obj = {key: value for key, value in new.items() if old.get(key) != value}
    for key in old:
        if key not in new:
            patch[key] = None
    return patch
