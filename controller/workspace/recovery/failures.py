"""Why a workspace pod failed, as one of four classes that decide how recovery retries it.
Pure.

- ``Infrastructure``: the cluster let the pod down (evicted, preempted, its node shut down or
  lost, no node fits it, the pod vanished). Retried soon and often.
- ``Resource``: the workspace outgrew what it was given (a container killed for memory, the
  pod evicted for filling its node's ephemeral storage). Raising a limit fixes it.
- ``Process``: a container crashed or exited (any exit code but the verifier's 81 to 84,
  which are reported as verification failures and never reach this module's callers).
- ``Configuration``: the pod cannot start as written (its image cannot be pulled, a Secret
  or ConfigMap it needs is missing). Retried rarely: only a change fixes it.

``classify`` names the class of a pod that failed as a whole, first match wins: no pod; a
container killed for memory, in its current **or last** state (a crash loop shows the kill only
in the last state while it waits to restart); an eviction for ephemeral storage; the pod's
own reason or a disruption; the scheduler's refusal; then the first informative container
reason, init containers first (they run first: a pod stuck in an init container shows only
``PodInitializing`` on its main containers).

``crash_count`` counts the exits of a pod's main containers so far (the kubelet's restart
count, plus the exit it is about to restart after); ``last_crash`` is the latest of them.
Every field is type-checked: a malformed status reads as "nothing known", never as a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from controller.types import Obj
from wspin.core.clock import parse_time

FailureClass = Literal["Infrastructure", "Resource", "Process", "Configuration"]
INFRASTRUCTURE: Final[FailureClass] = "Infrastructure"
RESOURCE: Final[FailureClass] = "Resource"
PROCESS: Final[FailureClass] = "Process"
CONFIGURATION: Final[FailureClass] = "Configuration"
CLASSES: Final[tuple[FailureClass, ...]] = (INFRASTRUCTURE, RESOURCE, PROCESS, CONFIGURATION)

OOM_KILLED: Final = "OOMKilled"
POD_LOST: Final = "PodLost"
EVICTED: Final = "Evicted"

INFRASTRUCTURE_REASONS: Final = frozenset(
    {
        EVICTED,
        "Preempting",
        "NodeShutdown",
        "NodeAffinity",
        "NodeLost",
        "Terminated",
        "DeadlineExceeded",
        "GracefulNodeShutdown",
        "DisruptionTarget",
        "UnexpectedAdmissionError",
        "OutOfcpu",
        "OutOfmemory",
        "OutOfpods",
    }
)
"""``status.reason`` of a pod the node or the control plane ended."""

IMAGE_REASONS: Final = frozenset(
    {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull"}
)
CONFIG_REASONS: Final = frozenset({"CreateContainerConfigError", "CreateContainerError"})
CONFIGURATION_REASONS: Final = IMAGE_REASONS | CONFIG_REASONS
UNINFORMATIVE: Final = frozenset({"", "ContainerCreating", "PodInitializing"})
"""Waiting reasons that say only that a container has not started yet."""


@dataclass(frozen=True)
class Failure:
    """One failure: its class, the reason it was read from, and where."""

    failure_class: FailureClass
    reason: str
    """A CamelCase reason: the pod's (``Evicted``), a container's (``OOMKilled``,
    ``CrashLoopBackOff``), the scheduler's (``Unschedulable``) or ``PodLost``."""
    message: str = ""
    """What the kubelet or the scheduler said, as written (redacted where it is shown)."""
    container: str = ""
    """The container it was read from ("" for the pod as a whole)."""


@dataclass(frozen=True)
class Crash:
    """The latest exit of a main container."""

    container: str
    exit_code: int
    reason: str
    """The kubelet's termination reason: ``Error``, ``OOMKilled``, ``Completed``, …"""
    message: str
    restarts: int
    waiting: bool
    """The container is not running again yet (waiting to restart, or just exited)."""

    @property
    def failure_class(self) -> FailureClass:
        return RESOURCE if self.reason == OOM_KILLED else PROCESS


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _obj(value: object) -> Obj:
    return value if isinstance(value, dict) else {}


def dicts(value: object) -> list[Obj]:
    """The dicts of a list field (none when it is not a list)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def spec_of(pod: Obj) -> Obj:
    """The pod's ``spec`` ({} when it is not an object)."""
    return _obj(pod.get("spec"))


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def statuses(pod: Obj, key: str) -> list[Obj]:
    """``status.<key>`` (``initContainerStatuses`` or ``containerStatuses``), type-checked."""
    return dicts(_obj(pod.get("status")).get(key))


def condition(pod: Obj, type_: str) -> Obj:
    """The pod condition of ``type_`` ({} when absent)."""
    found = (c for c in statuses(pod, "conditions") if c.get("type") == type_)
    return next(found, {})


def waiting(status: Obj) -> Obj | None:
    detail = _obj(status.get("state")).get("waiting")
    return detail if isinstance(detail, dict) else None


def terminated(status: Obj, key: str = "state") -> Obj | None:
    detail = _obj(status.get(key)).get("terminated")
    return detail if isinstance(detail, dict) else None


def running(status: Obj) -> bool:
    return isinstance(_obj(status.get("state")).get("running"), dict)


def exit_code(detail: Obj) -> int:
    code = detail.get("exitCode")
    return code if isinstance(code, int) and not isinstance(code, bool) else 0


def disruption(pod: Obj) -> Obj | None:
    """The pod's ``DisruptionTarget`` condition when True (evicted through the API, preempted,
    deleted by the taint manager or the pod GC, terminated by the kubelet)."""
    found = condition(pod, "DisruptionTarget")
    return found if found.get("status") == "True" else None


def unschedulable(pod: Obj) -> str | None:
    """The scheduler's message while it cannot place the pod, else None."""
    scheduled = condition(pod, "PodScheduled")
    if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        return _text(scheduled.get("message"))
    return None


def _oom(pod: Obj) -> Failure | None:
    for key in ("initContainerStatuses", "containerStatuses"):
        for status in statuses(pod, key):
            if running(status) and status.get("ready") is True:
                continue  # killed once, serving again: not why the pod fails now
            for state in ("state", "lastState"):
                detail = terminated(status, state)
                if detail is not None and detail.get("reason") == OOM_KILLED:
                    said, name = _text(detail.get("message")), _text(status.get("name"))
                    return Failure(RESOURCE, OOM_KILLED, said, name)
    return None


def container_reason(pod: Obj) -> tuple[str, str, str]:
    """The first informative (reason, message, container) of a container that is not running:
    init containers first, then main containers; ("", "", "") when none says anything."""
    for key in ("initContainerStatuses", "containerStatuses"):
        for status in statuses(pod, key):
            if running(status):
                continue
            detail = waiting(status) or terminated(status)
            if detail is None:
                continue
            reason = _text(detail.get("reason"))
            if reason in UNINFORMATIVE or (reason == "Completed" and key.startswith("init")):
                continue
            return reason, _text(detail.get("message")), _text(status.get("name"))
    return "", "", ""


def classify(pod: Obj | None) -> Failure:
    """The class of ``pod``'s failure (None: the pod is gone)."""
    if pod is None:
        return Failure(INFRASTRUCTURE, POD_LOST, "the workspace pod is gone")
    status = _obj(pod.get("status"))
    reason, message = _text(status.get("reason")), _text(status.get("message"))
    oom = _oom(pod)
    if oom is not None:
        return oom
    if reason == EVICTED and "ephemeral" in message:
        return Failure(RESOURCE, EVICTED, message)
    if reason in INFRASTRUCTURE_REASONS:
        return Failure(INFRASTRUCTURE, reason, message)
    disrupted = disruption(pod)
    if disrupted is not None:
        why = _text(disrupted.get("reason")) or "DisruptionTarget"
        return Failure(INFRASTRUCTURE, why, _text(disrupted.get("message")))
    refusal = unschedulable(pod)
    if refusal is not None:
        return Failure(INFRASTRUCTURE, "Unschedulable", refusal)
    found, detail, container = container_reason(pod)
    if found in CONFIGURATION_REASONS:
        return Failure(CONFIGURATION, found, detail, container)
    if found:
        return Failure(PROCESS, found, detail, container)
    return Failure(PROCESS, reason or "PodFailed", message)


def _exits(status: Obj, *, pod_ended: bool) -> int:
    """Exits of one container so far: each restart followed one, and a container that is not
    running again (waiting to restart, or terminated while its pod still runs) adds the exit
    it has not been restarted after yet. A pod that ended killed its containers itself: that
    last exit is the pod's failure, not the container's."""
    exits = _count(status.get("restartCount"))
    if pod_ended or running(status):
        return exits
    pending = waiting(status)
    if terminated(status) is not None or (
        pending is not None and pending.get("reason") == "CrashLoopBackOff"
    ):
        exits += 1
    return exits


def crash_count(pod: Obj) -> int:
    """Exits of ``pod``'s main containers so far: a number that only grows over the pod's life
    (a pod that ended or is being deleted stopped its containers itself: those last exits are
    not theirs)."""
    status = _obj(pod.get("status"))
    ended = _text(status.get("phase")) in ("Succeeded", "Failed") or bool(
        _obj(pod.get("metadata")).get("deletionTimestamp")
    )
    return sum(_exits(item, pod_ended=ended) for item in statuses(pod, "containerStatuses"))


def last_crash(pod: Obj) -> Crash | None:
    """The most recent exit of a main container (current or last termination), or None."""
    found: list[tuple[str, Crash]] = []
    for status in statuses(pod, "containerStatuses"):
        current = terminated(status)
        detail = current or terminated(status, "lastState")
        if detail is None:
            continue
        finished = parse_time(detail.get("finishedAt"))
        crash = Crash(
            container=_text(status.get("name")),
            exit_code=exit_code(detail),
            reason=_text(detail.get("reason")),
            message=_text(detail.get("message")).strip(),
            restarts=_count(status.get("restartCount")),
            waiting=not running(status),
        )
        found.append((finished.isoformat() if finished else "", crash))
    if not found:
        return None
    return max(found, key=lambda item: item[0])[1]
