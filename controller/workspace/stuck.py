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
boot failures (``boot``), reported and never answered by replacing the pod. The text the
kubelet or the scheduler wrote is quoted after our own sentence, redacted and cut short.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from controller.types import Obj
from controller.workspace import failures as fl
from controller.workspace.pod_events import PodEvent
from wspin.core.clock import parse_time
from wspin.core.contract import MAIN_CONTAINER, PLATFORM_INIT_PREFIX

UNSCHEDULABLE_AFTER: Final = 300.0
"""Seconds a pod may wait for a node before it is replaced (a node may be added meanwhile)."""
NOT_STARTED_AFTER: Final = 600.0
"""Seconds a container may take to start (pull its image, mount its volumes)."""
INIT_CRASH_AFTER: Final = 600.0
"""Seconds an init container may keep crashing before the pod is replaced."""
EVENTS_AFTER: Final = 60.0
"""Seconds a container may wait to start before the pod's Events are read for the cause."""
QUOTE_LIMIT: Final = 512
"""Characters of the kubelet's or the scheduler's own text kept in a message."""

UNSCHEDULABLE: Final = "Unschedulable"
IMAGE_PULL_FAILED: Final = "ImagePullFailed"
PLATFORM_IMAGE_PULL_FAILED: Final = "PlatformImagePullFailed"
CONTAINER_CONFIG_ERROR: Final = "ContainerConfigError"
VOLUME_MOUNT_FAILED: Final = "VolumeMountFailed"
NOT_STARTED: Final = "PodNotStarted"
INIT_CONTAINER_FAILING: Final = "InitContainerFailing"
REASONS: Final = (
    UNSCHEDULABLE,
    IMAGE_PULL_FAILED,
    PLATFORM_IMAGE_PULL_FAILED,
    CONTAINER_CONFIG_ERROR,
    VOLUME_MOUNT_FAILED,
    NOT_STARTED,
    INIT_CONTAINER_FAILING,
)
"""Every reason this module reports (the Ready reason and the metric's ``reason`` label)."""

_MOUNT_REASONS: Final = ("FailedMount", "FailedAttachVolume", "FailedMapVolume")
_MISSING = re.compile(r'\b(secret|configmap) "([^"]{1,253})" not found', re.I)
_MISSING_KEY = re.compile(r"couldn't find key (\S{1,253}) in (Secret|ConfigMap) ([^\s/]+)/(\S+)")
_VOLUME = re.compile(r'volume "([^"]{1,253})"')
_PULLED_IMAGE = re.compile(r'image "([^"]{1,1024})"')

Redact = Callable[[str], str]


@dataclass(frozen=True)
class Stuck:
    """A pod that is not starting: the reason, a message a user can act on, and when it counts."""

    reason: str
    message: str
    failure_class: fl.FailureClass
    since: datetime
    after: float
    """Seconds from ``since`` until the pod is replaced."""
    container: str = ""
    missing_secret: str = ""
    """A Secret the kubelet reports missing or lacking a key (the controller restores its own)."""

    @property
    def due(self) -> datetime:
        return self.since + timedelta(seconds=self.after)

    def overdue(self, now: datetime) -> bool:
        return now >= self.due

    def failure(self) -> fl.Failure:
        return fl.Failure(self.failure_class, self.reason, self.message, self.container)


def _dicts(value: object) -> list[Obj]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _spec(pod: Obj) -> Obj:
    spec = pod.get("spec")
    return spec if isinstance(spec, dict) else {}


def quote(text: str, redact: Redact) -> str:
    """The other party's text, redacted, on one line and cut to ``QUOTE_LIMIT``."""
    flat = " ".join(redact(text).split())
    return flat if len(flat) <= QUOTE_LIMIT else flat[: QUOTE_LIMIT - 1] + "…"


def _minutes(seconds: float) -> str:
    return f"{max(1, round(seconds / 60))} min"


def _platform(name: str) -> bool:
    return name.startswith(PLATFORM_INIT_PREFIX)


def _sidecars(pod: Obj) -> set[str]:
    return {
        str(c.get("name"))
        for c in _dicts(_spec(pod).get("initContainers"))
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
    for container in [] if main_ran else _dicts(_spec(pod).get("initContainers")):
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
    for container in _dicts(_spec(pod).get("containers")):
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
        bool(_spec(pod).get("nodeName"))
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
    """Why ``pod`` (created at ``created``) is not starting, or None."""
    refusal = fl.unschedulable(pod)
    if refusal is not None:
        return Stuck(
            UNSCHEDULABLE,
            unschedulable_message(pod, refusal, now - created, redact),
            fl.INFRASTRUCTURE,
            created,
            UNSCHEDULABLE_AFTER,
        )
    failing = _init_crash(pod, created, redact)
    if failing is not None:
        return failing
    found = blocked(pod, created)
    if found is None or not _scheduled(pod):
        return None
    name, status, since = found
    return _not_started(pod, name, status, since, now, events, redact)


def _init_crash(pod: Obj, created: datetime, redact: Redact) -> Stuck | None:
    sidecars = _sidecars(pod)
    for status in fl.statuses(pod, "initContainerStatuses"):
        name = str(status.get("name"))
        pending = fl.waiting(status)
        if _platform(name) or name in sidecars or pending is None:
            continue
        if pending.get("reason") != "CrashLoopBackOff":
            continue
        last = fl.terminated(status, "lastState") or {}
        oom = last.get("reason") == fl.OOM_KILLED
        said = str(last.get("message") or "").strip()
        message = (
            f"init container {name} keeps failing (exit {fl.exit_code(last)}"
            f"{', killed for using more memory than its limit' if oom else ''}; "
            f"{status.get('restartCount', 0)} restarts): check spec.packages and spec.initScript"
            f"{' or raise spec.memoryLimit' if oom else ''}; its log: kubectl logs -n "
            f"{_namespace(pod)} {_name(pod)} -c {name} --previous"
        )
        if said:
            message += f"; it said: {quote(said, redact)}"
        klass: fl.FailureClass = fl.RESOURCE if oom else fl.PROCESS
        return Stuck(INIT_CONTAINER_FAILING, message, klass, created, INIT_CRASH_AFTER, name)
    return None


def _not_started(
    pod: Obj,
    name: str,
    status: Obj,
    since: datetime,
    now: datetime,
    events: Sequence[PodEvent],
    redact: Redact,
) -> Stuck:
    pending = fl.waiting(status) or {}
    reason = str(pending.get("reason") or "")
    said = str(pending.get("message") or "")
    waited = _minutes((now - since).total_seconds())
    if reason in fl.IMAGE_REASONS:
        return _image(pod, name, said, since, redact)
    if reason in fl.CONFIG_REASONS:
        return _config(pod, name, said, since, redact)
    for event in events:
        if event.reason in _MOUNT_REASONS:
            return _mount(pod, event, since, redact)
        if event.reason == "Failed" and "pull" in event.message.lower():
            image = _PULLED_IMAGE.search(event.message)
            return _image(pod, name, event.message, since, redact, image.group(1) if image else "")
        if event.reason == "FailedCreatePodSandBox":
            runtime_class = str(_spec(pod).get("runtimeClassName") or "")
            hint = (
                f"check that RuntimeClass {runtime_class} is installed on the node"
                if runtime_class
                else "ask the platform team to check the node's container runtime"
            )
            return Stuck(
                NOT_STARTED,
                f"the node cannot create the workspace pod's sandbox for {waited}: {hint}; "
                f"kubelet: {quote(event.message, redact)}",
                fl.INFRASTRUCTURE,
                since,
                NOT_STARTED_AFTER,
                name,
            )
    return Stuck(
        NOT_STARTED,
        f"container {name} has not started after {waited} (waiting: {reason or 'not created'})",
        fl.INFRASTRUCTURE,
        since,
        NOT_STARTED_AFTER,
        name,
    )


def _container(pod: Obj, name: str) -> Obj:
    for key in ("initContainers", "containers"):
        for container in _dicts(_spec(pod).get(key)):
            if container.get("name") == name:
                return container
    return {}


def _runtime_image(pod: Obj) -> str:
    return str(_container(pod, MAIN_CONTAINER).get("image") or "")


def _image(
    pod: Obj, name: str, said: str, since: datetime, redact: Redact, image: str = ""
) -> Stuck:
    image = image or str(_container(pod, name).get("image") or "")
    if image and image == _runtime_image(pod):
        return Stuck(
            IMAGE_PULL_FAILED,
            f"the workspace image {quote(image, redact)} cannot be pulled for container {name}: "
            "check that spec.runtime (or its RuntimeEnvironment) names an image that exists and "
            f"that the cluster may pull it; kubelet: {quote(said, redact)}",
            fl.CONFIGURATION,
            since,
            NOT_STARTED_AFTER,
            name,
        )
    return Stuck(
        PLATFORM_IMAGE_PULL_FAILED,
        f"the platform image {quote(image or 'of ' + name, redact)} cannot be pulled for "
        f"container {name}: the platform team must make it available to the cluster "
        f"(the controller's --agentd-image, or the webhook's delivery images); "
        f"kubelet: {quote(said, redact)}",
        fl.CONFIGURATION,
        since,
        NOT_STARTED_AFTER,
        name,
    )


def _config(pod: Obj, name: str, said: str, since: datetime, redact: Redact) -> Stuck:
    namespace = _namespace(pod)
    missing = _MISSING.search(said)
    key = _MISSING_KEY.search(said)
    secret = ""
    if missing is not None:
        kind = "Secret" if missing.group(1).lower() == "secret" else "ConfigMap"
        secret = missing.group(2) if kind == "Secret" else ""
        what = f"{kind} {namespace}/{missing.group(2)} does not exist"
    elif key is not None:
        secret = key.group(4) if key.group(2) == "Secret" else ""
        what = f"{key.group(2)} {key.group(3)}/{key.group(4)} has no key {key.group(1)}"
    elif "runAsNonRoot" in said:
        what = "its image runs as root, which workspace pods refuse: use an image with a USER"
    else:
        what = "the kubelet cannot create it"
    return Stuck(
        CONTAINER_CONFIG_ERROR,
        f"container {name} cannot start: {what}; kubelet: {quote(said, redact)}",
        fl.CONFIGURATION,
        since,
        NOT_STARTED_AFTER,
        name,
        secret,
    )


def _mount(pod: Obj, event: PodEvent, since: datetime, redact: Redact) -> Stuck:
    named = _VOLUME.search(event.message)
    volume = named.group(1) if named else ""
    source = _volume_source(pod, volume)
    missing = _MISSING.search(event.message)
    if missing is not None:
        kind = "Secret" if missing.group(1).lower() == "secret" else "ConfigMap"
        what = f"{kind} {_namespace(pod)}/{missing.group(2)} does not exist"
        klass: fl.FailureClass = fl.CONFIGURATION
        secret = missing.group(2) if kind == "Secret" else ""
    else:
        what = f"check {source} and its storage" if source else "ask the platform team"
        klass, secret = fl.INFRASTRUCTURE, ""
    label = f"volume {volume}" + (f" ({source})" if source else "") if volume else "a volume"
    return Stuck(
        VOLUME_MOUNT_FAILED,
        f"{label} cannot be mounted: {what}; {event.reason}: {quote(event.message, redact)}",
        klass,
        since,
        NOT_STARTED_AFTER,
        missing_secret=secret,
    )


def _volume_source(pod: Obj, volume: str) -> str:
    for item in _dicts(_spec(pod).get("volumes")):
        if item.get("name") != volume:
            continue
        for key, label, field in (
            ("persistentVolumeClaim", "PersistentVolumeClaim", "claimName"),
            ("secret", "Secret", "secretName"),
            ("configMap", "ConfigMap", "name"),
            ("image", "image", "reference"),
        ):
            source = item.get(key)
            if isinstance(source, dict) and source.get(field):
                return f"{label} {source[field]}"
    return ""


def unschedulable_message(pod: Obj, said: str, waited: timedelta, redact: Redact) -> str:
    """No node fits: what the pod asks for that no node offers, and what to change."""
    claim = next(
        (
            str(volume["persistentVolumeClaim"].get("claimName") or "")
            for volume in _dicts(_spec(pod).get("volumes"))
            if isinstance(volume.get("persistentVolumeClaim"), dict)
        ),
        "",
    )
    hints = []
    if "Insufficient" in said or "Too many pods" in said:
        hints.append(
            f"no node has room for its requests ({_requests(pod)}): lower spec.cpu or "
            "spec.memory, or ask the platform team for capacity"
        )
    if "node affinity/selector" in said or "didn't match node selector" in said:
        selector = _spec(pod).get("nodeSelector")
        shown = ", ".join(f"{k}={v}" for k, v in sorted(selector.items())) if selector else ""
        hints.append(
            f"no node matches its node selector ({shown or 'none'}): set spec.architecture "
            "to an architecture the cluster has nodes for"
        )
    volume = f"PersistentVolumeClaim {claim}" if claim else "its PersistentVolumeClaim"
    if "unbound immediate PersistentVolumeClaims" in said:
        hints.append(
            f"{volume} is not bound yet: kubectl describe pvc -n {_namespace(pod)} {claim} "
            "shows why (its StorageClass, quota or provisioner)"
        )
    if "volume node affinity conflict" in said:
        hints.append(
            f"{volume} is bound to a volume no fitting node can reach (another zone): ask "
            "the platform team"
        )
    if "untolerated taint" in said:
        hints.append("the nodes that would fit are tainted for other work: ask the platform team")
    if not hints:
        hints.append("ask the platform team")
    return (
        f"no node can run the workspace pod ({_minutes(waited.total_seconds())} so far): "
        + "; ".join(hints)
        + f"; scheduler: {quote(said or 'no node fits the pod', redact)}"
    )


def _requests(pod: Obj) -> str:
    resources = _container(pod, MAIN_CONTAINER).get("resources")
    requests = resources.get("requests") if isinstance(resources, dict) else None
    if not isinstance(requests, dict) or not requests:
        return "none set"
    return ", ".join(f"{k}={v}" for k, v in sorted(requests.items()) if isinstance(v, str))


def _namespace(pod: Obj) -> str:
    meta = pod.get("metadata")
    return str(meta.get("namespace") or "") if isinstance(meta, dict) else ""


def _name(pod: Obj) -> str:
    meta = pod.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, dict) else ""
