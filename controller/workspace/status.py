"""Workspace status: phases, conditions and the pod facts they come from. Pure.

Conditions are the toolkit's (``controller.toolkit.conditions``): re-stating one is a no-op
and never causes a status write.
"""

from __future__ import annotations

from typing import Final, Literal

from controller.toolkit.conditions import condition, find_condition
from controller.types import Obj

Phase = Literal["Pending", "Creating", "Active", "Suspending", "Suspended", "Terminating", "Failed"]

READY: Final = "Ready"


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
