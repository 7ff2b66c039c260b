"""What a workspace pod's object says about it, read once into plain facts. Pure.

The kubelet writes the pod's status; every field read here is type-checked, so a malformed or
hand-edited status reads as "not ready", never as a crash or as ready.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from controller.types import Obj
from wspin.core.clock import parse_time
from wspin.core.contract import MAIN_CONTAINER, WORKSPACE_SETUP_CONTAINER

TERMINAL: Final = ("Succeeded", "Failed")
MAX_NOT_READY: Final = 8
"""Containers named in a not-ready message; a pod with more says how many it left out."""


@dataclass(frozen=True)
class PodFacts:
    """The facts the phase and the status fields are decided from."""

    name: str
    created: datetime | None
    """``metadata.creationTimestamp`` (the API server's clock)."""
    deleting: bool
    phase: str
    """``status.phase``: Pending, Running, Succeeded, Failed ("" when unknown)."""
    scheduled: bool
    unschedulable: str
    """The scheduler's message while it cannot place the pod ("" otherwise)."""
    ip: str
    ready: bool
    """The pod's Ready condition is True."""
    containers_ready: bool
    """Every container (and native sidecar) reports ready, the workspace container included."""
    not_ready: tuple[str, ...]
    """The containers that are not, each with what it waits for."""
    reason: str
    """``status.reason`` (Evicted, NodeLost, …)."""
    message: str
    image_tag: str
    """The workspace image's tag (``imageTag``)."""
    setup_seconds: float | None = None
    """How long ``workspace-setup`` ran to completion (None: it has not, or the pod has none)."""

    @property
    def terminal(self) -> bool:
        """Succeeded or Failed: a workspace pod (restartPolicy Always) only gets here by
        eviction, node loss or being deleted (the kubelet marks a pod it stopped terminal
        before it goes), and never comes back; it has to be replaced."""
        return self.phase in TERMINAL

    @property
    def serving(self) -> bool:
        """Running on an IP with every container ready: the only state the API may route to."""
        return (
            self.phase == "Running"
            and bool(self.ip)
            and self.ready
            and self.containers_ready
            and not self.deleting
        )


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _obj(value: object) -> Obj:
    return value if isinstance(value, dict) else {}


def _dicts(value: object) -> list[Obj]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _condition(conditions: list[Obj], type_: str) -> Obj:
    return next((c for c in conditions if c.get("type") == type_), {})


def pod_facts(pod: Obj) -> PodFacts:
    """The facts of ``pod`` as the API server returned it."""
    meta, spec, status = (_obj(pod.get(part)) for part in ("metadata", "spec", "status"))
    conditions = _dicts(status.get("conditions"))
    scheduled = _condition(conditions, "PodScheduled")
    unschedulable = (
        _text(scheduled.get("message")) or "no node fits the pod"
        if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable"
        else ""
    )
    containers_ready, not_ready = _readiness(spec, status)
    return PodFacts(
        name=_text(meta.get("name")),
        created=parse_time(meta.get("creationTimestamp")),
        deleting=bool(meta.get("deletionTimestamp")),
        phase=_text(status.get("phase")),
        # A pod past Pending ran on a node, whatever else its status says.
        scheduled=bool(_text(spec.get("nodeName")))
        or scheduled.get("status") == "True"
        or _text(status.get("phase")) in ("Running", *TERMINAL),
        unschedulable=unschedulable,
        ip=_text(status.get("podIP")),
        ready=_condition(conditions, "Ready").get("status") == "True",
        containers_ready=containers_ready,
        not_ready=not_ready,
        reason=_text(status.get("reason")),
        message=_text(status.get("message")),
        image_tag=_image_tag_of(spec, status),
        setup_seconds=_setup_seconds(status),
    )


def _setup_seconds(status: Obj) -> float | None:
    """``workspace-setup``'s run time, from its completed state's start and finish."""
    setup = next(
        (
            s
            for s in _dicts(status.get("initContainerStatuses"))
            if s.get("name") == WORKSPACE_SETUP_CONTAINER
        ),
        {},
    )
    done = _obj(_obj(setup.get("state")).get("terminated"))
    started, finished = parse_time(done.get("startedAt")), parse_time(done.get("finishedAt"))
    if done.get("exitCode") != 0 or started is None or finished is None or finished < started:
        return None
    return (finished - started).total_seconds()


def _readiness(spec: Obj, status: Obj) -> tuple[bool, tuple[str, ...]]:
    """Whether every container and native sidecar is ready, and which are not."""
    sidecars = {
        _text(c.get("name"))
        for c in _dicts(spec.get("initContainers"))
        if c.get("restartPolicy") == "Always"
    }
    statuses = [
        *_dicts(status.get("containerStatuses")),
        *(s for s in _dicts(status.get("initContainerStatuses")) if s.get("name") in sidecars),
    ]
    expected = {_text(c.get("name")) for c in _dicts(spec.get("containers"))} | sidecars
    expected.add(MAIN_CONTAINER)
    reported = {_text(s.get("name")): s for s in statuses}
    waiting: list[str] = []
    for name in sorted(expected):
        state = reported.get(name)
        if state is None:
            waiting.append(f"{name} (not started)")
        elif state.get("ready") is not True:
            waiting.append(f"{name} ({_waiting_for(state)})")
    return not waiting, tuple(waiting)


def _waiting_for(state: Obj) -> str:
    current = _obj(state.get("state"))
    for key in ("waiting", "terminated"):
        detail = current.get(key)
        if isinstance(detail, dict):
            return f"{key}: {_text(detail.get('reason')) or 'no reason given'}"
    return "running, not ready" if "running" in current else "not ready"


def describe_not_ready(facts: PodFacts) -> str:
    """``workspace (waiting: CrashLoopBackOff), agentd (running, not ready)``, bounded."""
    shown = list(facts.not_ready[:MAX_NOT_READY])
    if len(facts.not_ready) > MAX_NOT_READY:
        shown.append(f"{len(facts.not_ready) - MAX_NOT_READY} more")
    return ", ".join(shown)


def _tag(reference: str, *, need_path: bool) -> str:
    """The tag of an image reference: after a colon that follows the last ``/``, before any
    ``@digest`` ("" when there is none). ``need_path``: a bare ``sha256:…`` image id has no
    repository, so its colon is not a tag's."""
    name = reference.split("@", 1)[0]
    if need_path and "/" not in name:
        return ""
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else ""


def image_tag(image_id: str, image: str) -> str:
    """The tag the kubelet resolved (``imageID``), else the pod spec's, else the image."""
    return _tag(image_id, need_path=True) or _tag(image, need_path=False) or image


def _image_tag_of(spec: Obj, status: Obj) -> str:
    containers = _dicts(spec.get("containers"))
    main = next((c for c in containers if c.get("name") == MAIN_CONTAINER), {})
    reported = next(
        (s for s in _dicts(status.get("containerStatuses")) if s.get("name") == MAIN_CONTAINER),
        {},
    )
    return image_tag(_text(reported.get("imageID")), _text(main.get("image")))
