"""A workspace pod that is not starting, why, and what the user can do about it. Pure.

Three signals, each reported at once (Ready False with a reason and a message that names the
resource, Secret, ConfigMap or node constraint in the way) and acted on when it has lasted past
its threshold: the pod is deleted and replaced with the recovery backoff of its class.

- The scheduler cannot place the pod (``Unschedulable``): from the pod's creation, after
  ``UNSCHEDULABLE_AFTER``; class Infrastructure.
- A container that should start next has never run (an image that cannot be pulled, a
  missing Secret or ConfigMap, a volume that cannot be mounted, a sandbox that cannot be
  created): from the previous container's start or completion (the pod's creation for the
  first), after ``NOT_STARTED_AFTER``; class Configuration for images, Secrets and
  ConfigMaps, Infrastructure otherwise.
- An init container other than the platform's keeps crashing (``CrashLoopBackOff``): from
  the pod's creation, after ``INIT_CRASH_AFTER``; class Process (Resource when it is killed
  for memory).

The platform's own init containers and the agentd sidecar are not here: their failures are
boot failures (``boot``), reported and never answered by replacing the pod. What the
user reads about each is ``stuck_causes``'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from controller.types import Obj
from controller.workspace.recovery import failures as fl
from controller.workspace.recovery.causes import (
    Cause,
    Redact,
    init_crash,
    not_started,
    unschedulable,
)
from controller.workspace.recovery.pod_events import PodEvent
from wspin.core.clock import parse_time
from wspin.core.contract import PLATFORM_INIT_PREFIX

UNSCHEDULABLE_AFTER: Final = 300.0
"""Seconds a pod may wait for a node before it is replaced (a node may be added meanwhile)."""
NOT_STARTED_AFTER: Final = 600.0
"""Seconds a container may take to start (pull its image, mount its volumes)."""
INIT_CRASH_AFTER: Final = 600.0
"""Seconds an init container may keep crashing before the pod is replaced."""
EVENTS_AFTER: Final = 60.0
"""Seconds a container may wait to start before the pod's Events are read for the cause."""


@dataclass(frozen=True)
class Stuck:
    """A pod that is not starting: why (``stuck_causes``), and when it counts."""

    reason: str
    message: str
    failure_class: fl.FailureClass
    since: datetime
    after: float
    """Seconds from ``since`` until the pod is replaced."""
    container: str = ""
    missing_secret: str = ""
    """A Secret the kubelet reports missing or lacking a key (the controller restores its own)."""

    @classmethod
    def of(cls, cause: Cause, since: datetime, after: float) -> Stuck:
        return cls(
            cause.reason,
            cause.message,
            cause.failure_class,
            since,
            after,
            cause.container,
            cause.missing_secret,
        )

    @property
    def due(self) -> datetime:
        return self.since + timedelta(seconds=self.after)

    def overdue(self, now: datetime) -> bool:
        return now >= self.due

    def failure(self) -> fl.Failure:
        return fl.Failure(self.failure_class, self.reason, self.message, self.container)


def _platform(name: str) -> bool:
    return name.startswith(PLATFORM_INIT_PREFIX)


def _sidecars(pod: Obj) -> set[str]:
    return {
        str(c.get("name"))
        for c in fl.dicts(fl.spec_of(pod).get("initContainers"))
        if c.get("restartPolicy") == "Always"
    }


def _ever_ran(status: Obj) -> bool:
    return (
        fl.running(status)
        or fl.terminated(status) is not None
        or fl.terminated(status, "lastState") is not None
    )


def blocked(pod: Obj, created: datetime) -> tuple[str, Obj, datetime] | None:
    """The container the pod's start waits on that has never run, with its status and since
    when it should have started; None while every container that should run has run."""
    init = {str(s.get("name")): s for s in fl.statuses(pod, "initContainerStatuses")}
    main = {str(s.get("name")): s for s in fl.statuses(pod, "containerStatuses")}
    sidecars = _sidecars(pod)
    since = created
    # Main containers start only once every init container is done: one that ran says so.
    main_ran = any(_ever_ran(status) for status in main.values())
    for container in [] if main_ran else fl.dicts(fl.spec_of(pod).get("initContainers")):
        name = str(container.get("name"))
        status = init.get(name, {})
        if not _ever_ran(status):
            return name, status, since
        done = fl.terminated(status)
        if name in sidecars and fl.running(status):
            state = status.get("state")
            detail = state.get("running") if isinstance(state, dict) else None
            started = parse_time(detail.get("startedAt")) if isinstance(detail, dict) else None
            since = max(since, started or since)
            continue
        if done is None or fl.exit_code(done) != 0:
            return None  # running, or failing: not a start that never happened
        since = max(since, parse_time(done.get("finishedAt")) or since)
    for container in fl.dicts(fl.spec_of(pod).get("containers")):
        name = str(container.get("name"))
        status = main.get(name, {})
        if not _ever_ran(status):
            return name, status, since
    return None


def needs_events(pod: Obj, created: datetime, now: datetime) -> datetime | None:
    """When the pod's Events should be read for why a container does not start (a moment at
    or before ``now``: read them now), or None: its status says enough, or nothing waits."""
    found = blocked(pod, created)
    if found is None or fl.unschedulable(pod) is not None or not _scheduled(pod):
        return None
    _, status, since = found
    reason = str((fl.waiting(status) or {}).get("reason") or "")
    if reason not in fl.UNINFORMATIVE:
        return None
    return since + timedelta(seconds=EVENTS_AFTER)


def _scheduled(pod: Obj) -> bool:
    return (
        bool(fl.spec_of(pod).get("nodeName"))
        or fl.condition(pod, "PodScheduled").get("status") == "True"
    )


def detect(
    pod: Obj,
    *,
    created: datetime,
    now: datetime,
    events: Sequence[PodEvent] = (),
    redact: Redact = lambda text: text,
) -> Stuck | None:
    """Why ``pod`` (created at ``created``) is not starting, and when it counts; or None."""
    refusal = fl.unschedulable(pod)
    if refusal is not None:
        waited = (now - created).total_seconds()
        cause = unschedulable(pod, refusal, waited, redact)
        return Stuck.of(cause, created, UNSCHEDULABLE_AFTER)
    sidecars = _sidecars(pod)
    for status in fl.statuses(pod, "initContainerStatuses"):
        name = str(status.get("name"))
        crashing = (fl.waiting(status) or {}).get("reason") == "CrashLoopBackOff"
        if crashing and not _platform(name) and name not in sidecars:
            return Stuck.of(init_crash(pod, status, redact), created, INIT_CRASH_AFTER)
    found = blocked(pod, created)
    if found is None or not _scheduled(pod):
        return None
    name, status, since = found
    cause = not_started(pod, name, status, (now - since).total_seconds(), events, redact)
    return Stuck.of(cause, since, NOT_STARTED_AFTER)
