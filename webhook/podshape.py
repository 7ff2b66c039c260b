"""The injector's typed boundary: what every pod field it reads must be, and the 400 otherwise.

The API server sends pods it decoded into typed structs, but the webhook port is reachable by
anything in the cluster, and a value of the wrong type (a dict for ``env``, a number for
``volumeMounts``, ``null`` inside a list) must become a 400 naming the field, never an
exception and never a patch computed against a shape that is not there.

The bounds live here too. Every bound is far above any real pod, so it never refuses a real
workload; it exists so that one review cannot occupy the event loop that answers every other
pod creation in the cluster.

The injector reads each list of the pod once (``inject.py`` for containers and env,
``mountpaths.py`` for mounts and devices): one combined test per entry on the common path,
and only when it fails one of the functions below, which finds the first offending field and
builds its path. A path is never formatted for a field that is fine: a review is answered
many thousand times a second, and the paths would cost more than the checks.
"""

from __future__ import annotations

from typing import Any, Final

from wspin.core.errors import AdmissionDenied

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


def container_path(kind: str, index: int) -> str:
    """``spec.initContainers[2]``: how a denial names a container."""
    return f"spec.{kind}[{index}]"


def _object(parent: dict[str, Any], key: str, path: str) -> dict[str, Any] | None:
    value = parent.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise wrong_type(path, "an object", value)


def checked_list(value: object, path: str, bound: int) -> list[Any]:
    """``value`` (not None) as a list within ``bound``, or the 400 naming ``path``."""
    if not isinstance(value, list):
        raise wrong_type(path, "a list", value)
    if len(value) > bound:
        raise over_bound(path, len(value), bound)
    return value


def _string_map(value: dict[str, Any], path: str) -> int:
    """Check every value is a string; return the map's size in characters (a lower bound of
    its size in UTF-8 bytes, which the caller computes only when this is over a bound)."""
    try:  # in C: a join refuses any item that is not a string
        return len("".join(value)) + len("".join(value.values()))
    except TypeError:
        pass
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


def checked_metadata(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The workspace pod's ``metadata`` with name, generateName and annotations type-checked
    and the annotations within their size bound; then ``spec`` (None when absent)."""
    metadata = _object(pod, "metadata", "metadata") or {}
    _strings(metadata, "metadata", (), ("name", "generateName"))
    annotations = _object(metadata, "annotations", "metadata.annotations")
    if annotations is not None:
        size = _string_map(annotations, "metadata.annotations")
        if size > MAX_ANNOTATION_BYTES:
            size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
            if size > MAX_ANNOTATION_BYTES:
                raise over_bound("metadata.annotations", size, MAX_ANNOTATION_BYTES, "bytes")
    return _object(pod, "spec", "spec")


# -- one entry, after its combined test failed: raise naming the field, or accept ----------
#
# The combined tests compare exact types; these use ``isinstance``, so a subclass of the
# right type (never produced by a JSON decoder, possible from an in-process caller) passes.


def check_volume(volume: object, index: int) -> None:
    if not isinstance(volume, dict):
        raise wrong_type(f"spec.volumes[{index}]", "an object", volume)
    if not isinstance(volume.get("name"), str):
        raise wrong_type(f"spec.volumes[{index}].name", "a string", volume.get("name"))


def check_container(container: object, kind: str, index: int) -> None:
    path = container_path(kind, index)
    if not isinstance(container, dict):
        raise wrong_type(path, "an object", container)
    if not isinstance(container.get("name"), str):
        raise wrong_type(f"{path}.name", "a string", container.get("name"))


def check_mount(mount: object, kind: str, index: int, position: int) -> None:
    """A ``volumeMounts`` entry: an object with string name and mountPath, and, if present,
    string subPath and subPathExpr and a boolean readOnly."""
    where = f"{container_path(kind, index)}.volumeMounts[{position}]"
    if not isinstance(mount, dict):
        raise wrong_type(where, "an object", mount)
    _strings(mount, where, ("name", "mountPath"), ("subPath", "subPathExpr"))
    read_only = mount.get("readOnly")
    if read_only is not None and not isinstance(read_only, bool):
        raise wrong_type(f"{where}.readOnly", "a boolean", read_only)


def check_device(device: object, kind: str, index: int, position: int) -> None:
    where = f"{container_path(kind, index)}.volumeDevices[{position}]"
    if not isinstance(device, dict):
        raise wrong_type(where, "an object", device)
    _strings(device, where, ("name", "devicePath"), ())


def check_env(entry: object, kind: str, index: int, position: int) -> None:
    where = f"{container_path(kind, index)}.env[{position}]"
    if not isinstance(entry, dict):
        raise wrong_type(where, "an object", entry)
    _strings(entry, where, ("name",), ("value",))
