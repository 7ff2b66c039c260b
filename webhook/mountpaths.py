"""Path rules for the delivery mounts: nothing may shadow ``/agentd`` or ``/opencode``.

The API server compares mount paths as exact strings (it only checks that they are unique),
and the container runtime resolves them as paths. So ``/agentd/``, ``//agentd``, ``/agentd/.``,
``/./agentd`` and ``/a/../agentd`` all land on the pinned volume's mount point, and
``/agentd/usr/local/bin`` hides the pinned binary's directory under whatever volume is mounted
there — writable by any container that shares it. The in-pod hash check alone would then be a
check-then-exec race. Every path is therefore normalised before it is compared, and on every
container kind:

- no other volume may be mounted (or a block device placed) at or under either mount point;
- our volumes may be mounted only whole (no ``subPath``) at exactly their own mount point.
"""

from __future__ import annotations

from typing import Any, Final

from webhook.podshape import (
    MAX_MOUNTS,
    check_device,
    check_mount,
    checked_list,
    container_path,
)
from wspin.core.contract import AGENTD, OPENCODE, Artifact
from wspin.core.errors import AdmissionDenied

KIND_LABELS: Final = {
    "containers": "container",
    "initContainers": "init container",
    "ephemeralContainers": "ephemeral container",
}

_ROOTS: Final = tuple((a.mount_path, a.mount_path + "/", a) for a in (AGENTD, OPENCODE))
_PREFIXES: Final = tuple(a.mount_path for a in (AGENTD, OPENCODE))
BY_VOLUME: Final[dict[Any, Artifact]] = {a.volume: a for a in (AGENTD, OPENCODE)}


def _dots_are_names(path: str) -> bool:
    """Every ``/.`` in ``path`` starts a name (``/.cache``), not a ``.`` or ``..`` segment:
    dot-files are common in mount paths, and splitting every such path would cost more than
    the rest of the mount's checks."""
    return "/./" not in path and "/../" not in path and not path.endswith(("/.", "/.."))


def normalise(path: str) -> str:
    """The path the runtime mounts at: ``//`` collapsed, ``.`` dropped, ``..`` resolved (never
    above ``/``), no trailing ``/``; a relative path is taken from ``/``."""
    if (
        path.startswith("/")
        and "//" not in path
        and not path.endswith("/")
        and ("/." not in path or _dots_are_names(path))
    ):
        return path  # already normal: the common case, checked without splitting
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def artifact_under(normalised: str) -> Artifact | None:
    """The artifact whose mount point ``normalised`` is at or under, if any."""
    for root, prefix, artifact in _ROOTS:
        if normalised == root or normalised.startswith(prefix):
            return artifact
    return None


def shown(value: str, limit: int = 80) -> str:
    """A caller-supplied string quoted for a message, cut to ``limit`` characters."""
    return repr(value) if len(value) <= limit else repr(value[: limit - 1] + "…")


def _as_written(path: str, normalised: str) -> str:
    return shown(path) if path == normalised else f"{shown(path)} (that is {shown(normalised)})"


def shadowing(
    kind: str, container: str, volume: str, path: str, normalised: str
) -> AdmissionDenied:
    """Another volume mounted at or under a delivery mount point."""
    artifact = artifact_under(normalised)
    assert artifact is not None
    return AdmissionDenied(
        f"{KIND_LABELS[kind]} {shown(container)} mounts volume {shown(volume)} at "
        f"{_as_written(path, normalised)}, at or under {artifact.mount_path}, where only the "
        f"{artifact.name} image volume may be mounted",
        f"mount {shown(volume)} outside {artifact.mount_path}",
    )


def device_shadowing(
    kind: str, container: str, volume: str, path: str, normalised: str
) -> AdmissionDenied:
    """A block device placed at or under a delivery mount point."""
    artifact = artifact_under(normalised)
    assert artifact is not None
    return AdmissionDenied(
        f"{KIND_LABELS[kind]} {shown(container)} places block device {shown(volume)} at "
        f"{_as_written(path, normalised)}, at or under {artifact.mount_path}, where only the "
        f"{artifact.name} image volume may be mounted",
        f"put the device outside {artifact.mount_path}",
    )


def misplaced(kind: str, container: str, mount: dict[str, Any], normalised: str) -> AdmissionDenied:
    """One of our volumes mounted other than whole at its own mount point."""
    artifact = BY_VOLUME[mount["name"]]
    sub = mount.get("subPath") or mount.get("subPathExpr")
    how = f" with subPath {shown(sub)}" if sub else ""
    return AdmissionDenied(
        f"{KIND_LABELS[kind]} {shown(container)} mounts volume {shown(artifact.volume)} at "
        f"{_as_written(mount['mountPath'], normalised)}{how}; the {artifact.name} image volume "
        f"may only be mounted whole, read-only, at {artifact.mount_path}",
        "remove that mount: the webhook adds the right one",
    )


def scan_mounts(
    kind: str, index: int, container: dict[str, Any], name: str
) -> tuple[list[tuple[int, Artifact]], AdmissionDenied | None]:
    """The container's mounts of our volumes at their own mount points (by index), and the
    first mount or device that breaks the path rules.

    Type-checks ``volumeMounts`` and ``volumeDevices`` in the same pass (a wrong type is
    raised at once, ``podshape``). A broken rule is returned, not raised: a wrong type
    anywhere in the pod, and a pod that is no workspace pod, are named before it.
    """
    found: list[tuple[int, Artifact]] = []
    problem: AdmissionDenied | None = None
    mounts = container.get("volumeMounts")
    if mounts is not None and (type(mounts) is not list or len(mounts) > MAX_MOUNTS):
        checked_list(mounts, f"{container_path(kind, index)}.volumeMounts", MAX_MOUNTS)
    for position, mount in enumerate(mounts or ()):
        # One combined test per mount on the common path; the precise check only on failure.
        if (
            type(mount) is not dict
            or type(volume := mount.get("name")) is not str
            or type(path := mount.get("mountPath")) is not str
            or (
                len(mount) > 2  # name and mountPath are all most mounts carry
                and (
                    type(mount.get("readOnly", False)) is not bool
                    or type(mount.get("subPath", "")) is not str
                    or type(mount.get("subPathExpr", "")) is not str
                )
            )
        ):
            check_mount(mount, kind, index, position)
            volume, path = mount["name"], mount["mountPath"]
        if (
            volume not in BY_VOLUME
            and path[:1] == "/"
            and not path.startswith(_PREFIXES)
            and "//" not in path
            and ("/." not in path or _dots_are_names(path))
        ):
            continue  # an ordinary volume at an already-normal path elsewhere: most mounts
        if problem is not None:
            continue  # the type checks go on; the first broken rule is the one named
        normalised = normalise(path)
        ours = BY_VOLUME.get(volume)
        if ours is None:
            if artifact_under(normalised) is not None:
                problem = shadowing(kind, name, volume, path, normalised)
        elif normalised != ours.mount_path or mount.get("subPath") or mount.get("subPathExpr"):
            problem = misplaced(kind, name, mount, normalised)
        else:
            found.append((position, ours))
    devices = container.get("volumeDevices")
    if devices is not None and (type(devices) is not list or len(devices) > MAX_MOUNTS):
        checked_list(devices, f"{container_path(kind, index)}.volumeDevices", MAX_MOUNTS)
    for position, device in enumerate(devices or ()):
        if (
            type(device) is not dict
            or type(volume := device.get("name")) is not str
            or type(path := device.get("devicePath")) is not str
        ):
            check_device(device, kind, index, position)
            volume, path = device["name"], device["devicePath"]
        if problem is None:
            normalised = normalise(path)
            if artifact_under(normalised) is not None:
                problem = device_shadowing(kind, name, volume, path, normalised)
    return found, problem
