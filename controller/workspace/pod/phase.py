"""The Workspace phases, and the phase a running Workspace is in, decided from its pod's
facts. Pure.

``Suspending`` → ``Suspended`` (no pod, the volume kept) → ``Resuming`` on a resume request;
``Terminating`` → ``Terminated`` on deletion; ``Failed`` while no pod can be built. Phases
while the Workspace should run:

- ``Pending``: a new Workspace whose first pod is not scheduled yet (its volume binding, or no
  node fits).
- ``Creating``: the pod is starting, or is not ready; also while a pod is replaced, and after a
  resume (the phase never goes back to Pending once the Workspace has had a pod).
- ``Active``: the pod is Running on an IP with every container (and the agentd sidecar)
  ready. This is what the API routes by (``phase == Active`` and ``podIP``), so it holds only
  while that is true: a pod that stops being ready turns an Active Workspace back to Creating
  (Ready=False ``PodNotReady`` naming the containers) on the pod's own status event, and its
  ``podIP``/``endpoint`` are withdrawn until it is ready again.

A pod lost while Active (gone, deleted by someone else, evicted) is ``TransientPodLoss``; a
pod that ended before it ever served is ``PodFailedDuringCreation`` (``status.failureReason``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from controller.types import Obj
from controller.workspace.pod.facts import PodFacts, describe_not_ready
from wspin.core.clock import parse_time
from wspin.core.fleet import Phase

TRANSIENT_POD_LOSS: Final = "TransientPodLoss"
POD_FAILED_DURING_CREATION: Final = "PodFailedDuringCreation"
POD_BUILD_FAILED: Final = "PodBuildFailed"

SCHEDULING: Final = "waiting for the workspace pod to be scheduled"
_FIRST: Final = ("", "Pending", "Failed")
"""Previous phases after which an unscheduled pod still reads as Pending."""


@dataclass(frozen=True)
class Observation:
    phase: Phase
    reason: str
    """The Ready condition's reason."""
    message: str
    failure_reason: str = ""


def waiting_phase(previous: str) -> Phase:
    """Pending for a Workspace that never had a pod, Creating after that."""
    return "Pending" if previous in _FIRST else "Creating"


def recycling(previous: str, why: str) -> Observation:
    """The controller is replacing the pod on purpose (``why``): not a failure."""
    return Observation(waiting_phase(previous), "PodRecreating", f"recreating the pod: {why}")


def served_before(status: Obj, pod: PodFacts) -> bool:
    """Whether ``pod`` was Active before: the recorded ``startTime`` is when the Workspace
    became Active on its current pod, so it follows that pod's creation (a later pod is
    created after the earlier one became Active)."""
    started = parse_time(status.get("startTime"))
    return started is not None and pod.created is not None and pod.created <= started


def observe(pod: PodFacts | None, previous: str, *, served: bool = False) -> Observation:
    """The phase and Ready reason for a Workspace that should run, whose pod is ``pod`` (None:
    there is none, and one is being created), after phase ``previous``; ``served``: the pod
    was Active before (``served_before``), so not being ready is a regression, not a start."""
    waiting = waiting_phase(previous)
    was_active = previous == "Active"
    if pod is None:
        if was_active:
            return Observation(
                "Creating",
                "PodLost",
                "the workspace pod is gone; a new one is being created",
                TRANSIENT_POD_LOSS,
            )
        # Worded as the next pass will see the new pod (not scheduled yet), so that pass
        # has nothing to write.
        return Observation(waiting, "PodPending", SCHEDULING)
    if pod.deleting:
        lost = TRANSIENT_POD_LOSS if was_active else ""
        return Observation(
            waiting, "PodTerminating", "waiting for the previous workspace pod to stop", lost
        )
    if pod.terminal:
        what = f"{pod.reason}: {pod.message}" if pod.message else pod.reason or pod.phase
        return Observation(
            waiting,
            "PodEvicted" if pod.reason == "Evicted" else "PodEnded",
            f"the workspace pod ended ({what}); a new one is being created",
            TRANSIENT_POD_LOSS if was_active else POD_FAILED_DURING_CREATION,
        )
    if pod.serving:
        return Observation("Active", "PodReady", "workspace pod is ready")
    if not pod.scheduled:
        message = SCHEDULING
        if pod.unschedulable:
            message += f": {pod.unschedulable}"
        return Observation(waiting, "PodPending", message)
    if was_active or served:
        return Observation(
            "Creating", "PodNotReady", f"workspace pod is not ready: {_unready(pod)}"
        )
    return Observation("Creating", "PodStarting", f"workspace pod is starting: {_unready(pod)}")


def _unready(pod: PodFacts) -> str:
    if pod.phase != "Running":
        return f"pod {pod.phase or 'Pending'}" + (
            f"; {describe_not_ready(pod)}" if pod.not_ready else ""
        )
    if not pod.ip:
        return "no pod IP yet"
    return describe_not_ready(pod) or "the kubelet reports it not ready"
