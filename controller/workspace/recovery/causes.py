"""Why a workspace pod does not start, in words a user can act on. Pure.

Each builder turns what the kubelet, the scheduler or the pod's Events say into a ``Cause``: a
reason (the Ready reason, the metric's ``reason`` label), our own sentence naming what is in
the way (the image and the field that sets it, the Secret or ConfigMap and its key, the
requests no node has room for, the node selector no node matches, the claim that is not
bound, the volume that will not mount) and the failure class it counts as. Their own text is
quoted after that sentence, redacted, on one line and cut to ``QUOTE_LIMIT``: never alone.
When it counts is ``stuck``'s to decide.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from controller.types import Obj
from controller.workspace.recovery import failures as fl
from controller.workspace.recovery.pod_events import PodEvent
from wspin.core.contract import MAIN_CONTAINER

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
"""Every reason a pod that does not start is reported with."""

MOUNT_REASONS: Final = ("FailedMount", "FailedAttachVolume", "FailedMapVolume")
_MISSING = re.compile(r'\b(secret|configmap) "([^"]{1,253})" not found', re.I)
_MISSING_KEY = re.compile(r"couldn't find key (\S{1,253}) in (Secret|ConfigMap) ([^\s/]+)/(\S+)")
_VOLUME = re.compile(r'volume "([^"]{1,253})"')
_PULLED_IMAGE = re.compile(r'image "([^"]{1,1024})"')

Redact = Callable[[str], str]


@dataclass(frozen=True)
class Cause:
    """Why a pod does not start, and what it counts as."""

    reason: str
    message: str
    failure_class: fl.FailureClass
    container: str = ""
    missing_secret: str = ""
    """A Secret the kubelet reports missing or lacking a key (the controller restores its own)."""


def quote(text: str, redact: Redact) -> str:
    """The other party's text, redacted, on one line and cut to ``QUOTE_LIMIT``."""
    flat = " ".join(redact(text).split())
    return flat if len(flat) <= QUOTE_LIMIT else flat[: QUOTE_LIMIT - 1] + "…"


def minutes(seconds: float) -> str:
    return f"{max(1, round(seconds / 60))} min"


def init_crash(pod: Obj, status: Obj, redact: Redact) -> Cause:
    """An init container (not the platform's) that keeps crashing: what it said, what to check."""
    name = str(status.get("name"))
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
    return Cause(INIT_CONTAINER_FAILING, message, klass, name)


def not_started(
    pod: Obj, name: str, status: Obj, waited: float, events: Sequence[PodEvent], redact: Redact
) -> Cause:
    """Container ``name`` has never run after ``waited`` seconds: the image, the Secret or
    ConfigMap, the volume or the sandbox in the way, from its status or else the Events."""
    pending = fl.waiting(status) or {}
    reason = str(pending.get("reason") or "")
    said = str(pending.get("message") or "")
    after = minutes(waited)
    if reason in fl.IMAGE_REASONS:
        return image_pull(pod, name, said, redact)
    if reason in fl.CONFIG_REASONS:
        return config_error(pod, name, said, redact)
    for event in events:
        if event.reason in MOUNT_REASONS:
            return mount_failure(pod, event, redact)
        if event.reason == "Failed" and "pull" in event.message.lower():
            image = _PULLED_IMAGE.search(event.message)
            return image_pull(pod, name, event.message, redact, image.group(1) if image else "")
        if event.reason == "FailedCreatePodSandBox":
            runtime_class = str(fl.spec_of(pod).get("runtimeClassName") or "")
            hint = (
                f"check that RuntimeClass {runtime_class} is installed on the node"
                if runtime_class
                else "ask the platform team to check the node's container runtime"
            )
            return Cause(
                NOT_STARTED,
                f"the node cannot create the workspace pod's sandbox for {after}: {hint}; "
                f"kubelet: {quote(event.message, redact)}",
                fl.INFRASTRUCTURE,
                name,
            )
    return Cause(
        NOT_STARTED,
        f"container {name} has not started after {after} (waiting: {reason or 'not created'})",
        fl.INFRASTRUCTURE,
        name,
    )


def _container(pod: Obj, name: str) -> Obj:
    for key in ("initContainers", "containers"):
        for container in fl.dicts(fl.spec_of(pod).get(key)):
            if container.get("name") == name:
                return container
    return {}


def _runtime_image(pod: Obj) -> str:
    return str(_container(pod, MAIN_CONTAINER).get("image") or "")


def image_pull(pod: Obj, name: str, said: str, redact: Redact, image: str = "") -> Cause:
    """An image that cannot be pulled: the workspace image (``spec.runtime``'s) or the
    platform's; ``image`` when the Events named it."""
    image = image or str(_container(pod, name).get("image") or "")
    if image and image == _runtime_image(pod):
        return Cause(
            IMAGE_PULL_FAILED,
            f"the workspace image {quote(image, redact)} cannot be pulled for container {name}: "
            "check that spec.runtime (or its RuntimeEnvironment) names an image that exists and "
            f"that the cluster may pull it; kubelet: {quote(said, redact)}",
            fl.CONFIGURATION,
            name,
        )
    return Cause(
        PLATFORM_IMAGE_PULL_FAILED,
        f"the platform image {quote(image or 'of ' + name, redact)} cannot be pulled for "
        f"container {name}: the platform team must make it available to the cluster "
        f"(the controller's --agentd-image, or the webhook's delivery images); "
        f"kubelet: {quote(said, redact)}",
        fl.CONFIGURATION,
        name,
    )


def config_error(pod: Obj, name: str, said: str, redact: Redact) -> Cause:
    """A container the kubelet cannot create: the Secret, ConfigMap or key it lacks."""
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
    return Cause(
        CONTAINER_CONFIG_ERROR,
        f"container {name} cannot start: {what}; kubelet: {quote(said, redact)}",
        fl.CONFIGURATION,
        name,
        secret,
    )


def mount_failure(pod: Obj, event: PodEvent, redact: Redact) -> Cause:
    """A volume that will not mount or attach (from an Event): which, and what backs it."""
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
    return Cause(
        VOLUME_MOUNT_FAILED,
        f"{label} cannot be mounted: {what}; {event.reason}: {quote(event.message, redact)}",
        klass,
        missing_secret=secret,
    )


def _volume_source(pod: Obj, volume: str) -> str:
    for item in fl.dicts(fl.spec_of(pod).get("volumes")):
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


def unschedulable(pod: Obj, said: str, waited: float, redact: Redact) -> Cause:
    """No node fits: what the pod asks for that no node offers, and what to change."""
    claim = next(
        (
            str(volume["persistentVolumeClaim"].get("claimName") or "")
            for volume in fl.dicts(fl.spec_of(pod).get("volumes"))
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
        selector = fl.spec_of(pod).get("nodeSelector")
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
    message = (
        f"no node can run the workspace pod ({minutes(waited)} so far): "
        + "; ".join(hints)
        + f"; scheduler: {quote(said or 'no node fits the pod', redact)}"
    )
    return Cause(UNSCHEDULABLE, message, fl.INFRASTRUCTURE)


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
