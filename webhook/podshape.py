"""The injector's typed boundary: every pod field it reads is checked here, once, before use.

The API server sends pods it decoded into typed structs, but the webhook port is reachable by
anything in the cluster, and a value of the wrong type (a dict for ``env``, a number for
``volumeMounts``, ``null`` inside a list) must become a 400 naming the field, never an
exception and never a patch computed against a shape that is not there.

The walk is also where the size bounds live. Every bound is far above any real pod, so it
never refuses a real workload; it exists so that one review cannot occupy the event loop that
answers every other pod creation in the cluster. The walk is linear in the number of entries
it visits and reads only what the injector reads.
"""

from __future__ import annotations

from typing import Any, Final

from wspin.contract import MAIN_CONTAINER
from wspin.errors import AdmissionDenied

MAX_CONTAINERS: Final = 256
"""Entries per container list (``containers``, ``initContainers``, ``ephemeralContainers``)."""
MAX_VOLUMES: Final = 4096
"""Entries of ``spec.volumes``."""
MAX_MOUNTS: Final = 16384
"""``volumeMounts`` (and ``volumeDevices``) per container: the 12,000-mount review the
injector is measured with stays inside, 1.5 MiB of etcd object cannot hold many more."""
MAX_ENV: Final = 16384
"""``env`` entries of the ``workspace`` container (the only env the injector reads)."""
MAX_ANNOTATION_BYTES: Final = 256 * 1024
"""Total size of keys and values of ``metadata.annotations``: the API server's own limit
(256 KiB), which it enforces only after mutating admission."""

CONTAINER_KINDS: Final = ("containers", "initContainers", "ephemeralContainers")

_FIX_TYPE = "send the pod as the Kubernetes API defines it (check the manifest or the client)"


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def wrong_type(path: str, expected: str, value: object) -> AdmissionDenied:
    """The 400 for a field of the wrong type, naming the field's path."""
    return AdmissionDenied(f"{path} must be {expected}, got {_type_name(value)}", _FIX_TYPE, 400)


def over_bound(path: str, count: int, bound: int, unit: str = "entries") -> AdmissionDenied:
    """The denial for a list or map over its bound, naming the field and the bound."""
    return AdmissionDenied(
        f"{path} has {count} {unit}; the wspin webhook accepts at most {bound}",
        "a bound far above any real pod; split the workload across pods",
        400,
    )


def _object(parent: dict[str, Any], key: str, path: str) -> dict[str, Any] | None:
    value = parent.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise wrong_type(path, "an object", value)


def _list(parent: dict[str, Any], key: str, path: str, bound: int) -> list[Any] | None:
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise wrong_type(path, "a list", value)
    if len(value) > bound:
        raise over_bound(path, len(value), bound)
    return value


def _string_map(value: dict[str, Any], path: str) -> int:
    """Check every value is a string; return the map's size in characters (a lower bound of
    its size in UTF-8 bytes, which the caller computes only when this is over a bound)."""
    size = 0
    for key, item in value.items():
        if not isinstance(item, str):
            raise wrong_type(f"{path}[{key[:63]!r}]", "a string", item)
        size += len(key) + len(item)
    return size


def _strings(
    entry: dict[str, Any], path: str, required: tuple[str, ...], optional: tuple[str, ...]
) -> None:
    for key in required:
        if not isinstance(entry.get(key), str):
            raise wrong_type(f"{path}.{key}", "a string", entry.get(key))
    for key in optional:
        value = entry.get(key)
        if value is not None and not isinstance(value, str):
            raise wrong_type(f"{path}.{key}", "a string", value)


def checked_labels(pod: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` and ``metadata.labels`` of any pod, type-checked (the only fields read
    before the injector knows whether this is a workspace pod)."""
    metadata = _object(pod, "metadata", "metadata")
    if metadata is None:
        return {}
    labels = _object(metadata, "labels", "metadata.labels")
    if labels is None:
        return {}
    _string_map(labels, "metadata.labels")
    return labels


def check_workspace_pod(pod: dict[str, Any]) -> None:
    """Type-check and bound every field the injector reads of a workspace pod.

    Raises ``AdmissionDenied`` with code 400 naming the first offending field.
    """
    metadata = _object(pod, "metadata", "metadata") or {}
    _strings(metadata, "metadata", (), ("name", "generateName"))
    annotations = _object(metadata, "annotations", "metadata.annotations")
    if annotations is not None:
        size = _string_map(annotations, "metadata.annotations")
        if size > MAX_ANNOTATION_BYTES:
            size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
            if size > MAX_ANNOTATION_BYTES:
                raise over_bound("metadata.annotations", size, MAX_ANNOTATION_BYTES, "bytes")
    spec = _object(pod, "spec", "spec")
    if spec is None:
        return
    volumes = _list(spec, "volumes", "spec.volumes", MAX_VOLUMES) or ()
    for index, volume in enumerate(volumes):
        if not isinstance(volume, dict):
            raise wrong_type(f"spec.volumes[{index}]", "an object", volume)
        if not isinstance(volume.get("name"), str):
            raise wrong_type(f"spec.volumes[{index}].name", "a string", volume.get("name"))
    for kind in CONTAINER_KINDS:
        containers = _list(spec, kind, f"spec.{kind}", MAX_CONTAINERS) or ()
        for index, container in enumerate(containers):
            _check_container(container, f"spec.{kind}[{index}]", kind)


def _mount_problem(mount: object, where: str) -> AdmissionDenied:
    if not isinstance(mount, dict):
        return wrong_type(where, "an object", mount)
    for key in ("name", "mountPath"):
        if not isinstance(mount.get(key), str):
            return wrong_type(f"{where}.{key}", "a string", mount.get(key))
    raise AssertionError("called for a mount without a problem")


def _check_container(container: object, path: str, kind: str) -> None:
    if not isinstance(container, dict):
        raise wrong_type(path, "an object", container)
    name = container.get("name")
    if not isinstance(name, str):
        raise wrong_type(f"{path}.name", "a string", name)
    mounts = _list(container, "volumeMounts", f"{path}.volumeMounts", MAX_MOUNTS) or ()
    for index, mount in enumerate(mounts):
        # One combined test per mount on the common path; the precise message only on failure.
        if (
            type(mount) is not dict
            or type(mount.get("name")) is not str
            or type(mount.get("mountPath")) is not str
        ):
            raise _mount_problem(mount, f"{path}.volumeMounts[{index}]")
        if len(mount) > 2:  # name and mountPath are all most mounts carry
            where = f"{path}.volumeMounts[{index}]"
            _strings(mount, where, (), ("subPath", "subPathExpr"))
            read_only = mount.get("readOnly")
            if read_only is not None and not isinstance(read_only, bool):
                raise wrong_type(f"{where}.readOnly", "a boolean", read_only)
    devices = _list(container, "volumeDevices", f"{path}.volumeDevices", MAX_MOUNTS) or ()
    for index, device in enumerate(devices):
        where = f"{path}.volumeDevices[{index}]"
        if not isinstance(device, dict):
            raise wrong_type(where, "an object", device)
        _strings(device, where, ("name", "devicePath"), ())
    if kind == "containers" and name == MAIN_CONTAINER:
        env = _list(container, "env", f"{path}.env", MAX_ENV) or ()
        for index, entry in enumerate(env):
            where = f"{path}.env[{index}]"
            if not isinstance(entry, dict):
                raise wrong_type(where, "an object", entry)
            if not isinstance(entry.get("name"), str):
                raise wrong_type(f"{where}.name", "a string", entry.get("name"))
            value = entry.get("value")
            if value is not None and not isinstance(value, str):
                raise wrong_type(f"{where}.value", "a string", value)
