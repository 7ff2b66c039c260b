"""The pod injector: a pure function from (pod, configuration) to JSON-patch ops and warnings.

It serves both the admission webhook and the offline ``wspin inject`` command, so the two can
never disagree. No I/O, no logging, no clock, no environment: everything it needs arrives in
``InjectConfig``.

Ops are built directly rather than by diffing two pod copies: diffing costs a deep copy and
emits spurious ops. Each list of the pod is read once: the same pass checks the field types
and size bounds (``podshape``), applies the mount path rules (``mountpaths``) and finds the
entries to edit, so the ops below index only into lists that exist. The denial named is the
one a check-everything-first order would name: a wrong type anywhere, then a pod that is no
workspace pod, then the first broken path rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from operator import attrgetter
from typing import Any, Literal, TypedDict

import orjson

from webhook import patch
from webhook.injectconfig import InjectConfig as InjectConfig
from webhook.mountpaths import BY_VOLUME, scan_mounts, shown
from webhook.podshape import (
    CONTAINER_KINDS,
    MAX_CONTAINERS,
    MAX_ENV,
    MAX_VOLUMES,
    check_container,
    check_env,
    check_volume,
    checked_labels,
    checked_list,
    checked_metadata,
    container_path,
)
from wspin.core.contract import (
    AGENTD,
    DELIVERY_ANNOTATION,
    MAIN_CONTAINER,
    OPENCODE,
    PLATFORM_INIT_PREFIX,
    SIDECAR_CONTAINER,
    Artifact,
)
from wspin.core.errors import AdmissionDenied
from wspin.core.workspace_pod import (
    SELECTOR,
    artifacts_for,
    entrypoint_problem,
    has_selector_labels,
    workspace_pod_problem,
)

Pod = dict[str, Any]


class PatchOp(TypedDict, total=False):
    op: Literal["add", "replace", "remove"]
    path: str
    value: Any


@dataclass  # not frozen, as ``Decision`` (``webhook.admission``): built for every pod
class Injection:
    """The injector's answer. ``skipped`` says why a pod needs no delivery at all."""

    ops: tuple[patch.Op, ...] = ()
    """The patch's ops, encoded (``webhook.patch``)."""
    warnings: tuple[str, ...] = ()
    skipped: str | None = None
    artifacts: tuple[str, ...] = ()
    """Artifacts whose image volume the patch adds or replaces (the injections metric)."""

    @property
    def changed(self) -> bool:
        return bool(self.ops)

    def patch_json(self) -> bytes:
        """The patch as the JSON an AdmissionResponse carries."""
        return patch.array(self.ops)

    @cached_property
    def patch(self) -> tuple[PatchOp, ...]:
        """The patch's ops as dicts (decoded: the caller may mutate them)."""
        return tuple(orjson.loads(self.patch_json()))


_NOT_SELECTED = Injection(skipped=f"not a workspace pod (labels {SELECTOR} absent)")


def inject(pod: Pod, cfg: InjectConfig) -> Injection:
    """Compute the patch that gives ``pod`` the delivery wiring of ``cfg``.

    Not a workspace pod → skipped, no patch. A field of the wrong type or a list over its
    bound → ``AdmissionDenied`` (400) naming it (``podshape``). Labelled but without the
    Workspace label or a ``workspace`` container (``workspace_pod_problem``), a mount that
    breaks the path rules (``mountpaths``), or a ``workspace`` container or ``agentd`` sidecar
    that does not run the delivered entry point (``entrypoint_problem``) → ``AdmissionDenied``.
    An already-wired pod → empty patch (plus the receipt annotation if that is missing).
    Linear in the size of the pod.
    """
    if not has_selector_labels(checked_labels(pod)):
        return _NOT_SELECTED
    spec = checked_metadata(pod)
    ops: list[patch.Op] = []
    warnings: list[str] = []
    artifacts: tuple[str, ...] = ()
    broken: AdmissionDenied | None = None
    if spec is not None:
        artifacts = _inject_volumes(spec, cfg, ops, warnings)
        broken = _inject_containers(spec, cfg, ops, warnings)
    problem = workspace_pod_problem(pod)
    if problem:
        raise AdmissionDenied(problem)
    if broken is not None:
        raise broken
    problem = entrypoint_problem(pod)
    if problem:
        raise AdmissionDenied(
            problem, "workspace pods are built by the controller from a Workspace"
        )
    if len(ops) > MAX_PATCH_OPS:
        raise AdmissionDenied(
            f"the pod needs {len(ops)} delivery edits, more than {MAX_PATCH_OPS}: remove the "
            "duplicate agentd/opencode volumes, mounts and env entries it carries"
        )
    _inject_receipt(pod, cfg, ops)
    return Injection(tuple(ops), tuple(warnings), None, artifacts)


MAX_PATCH_OPS = 512
"""Edits one patch may make. A real pod needs one or two per container at most (256 ``platform-*``
init containers each get a mount); thousands are a pod built so that the answer, all removals,
is far larger than the compressed request, and it is denied before that answer is built."""


# Every container's path, encoded (and checked for characters JSON escapes) once.
_CONTAINER_PATHS: dict[str, list[bytes]] = {
    kind: [patch.encoded_path(f"/spec/{kind}/{index}") for index in range(MAX_CONTAINERS)]
    for kind in CONTAINER_KINDS
}


def _inject_containers(
    spec: dict[str, Any], cfg: InjectConfig, ops: list[patch.Op], warnings: list[str]
) -> AdmissionDenied | None:
    """Check every container and edit those that need it; return the first broken path rule.

    Once a rule is broken the pod is denied: the remaining containers are only checked.
    """
    broken: AdmissionDenied | None = None
    for kind in CONTAINER_KINDS:
        containers = spec.get(kind)
        if containers is None:
            continue
        if type(containers) is not list or len(containers) > MAX_CONTAINERS:
            checked_list(containers, f"spec.{kind}", MAX_CONTAINERS)
        for index, container in enumerate(containers):
            if type(container) is not dict or type(name := container.get("name")) is not str:
                check_container(container, kind, index)
                name = container["name"]
            ours, rule = scan_mounts(kind, index, container, name)
            main = kind == "containers" and name == MAIN_CONTAINER
            supplied = _supplied_pins(container, index, cfg) if main else []
            if broken is None:
                broken = rule
            if broken is not None or kind == "ephemeralContainers":
                continue  # ephemeral: checked only, the API server refuses them on CREATE
            wanted = artifacts_for(name, kind)
            if not wanted and not ours:
                continue  # most containers: nothing of ours to add or remove
            prefix = _CONTAINER_PATHS[kind][index]
            _inject_mounts(container, prefix, wanted, ours, ops, warnings)
            if main:
                _inject_env(container, prefix, cfg, supplied, ops, warnings)
    return broken


# -- list edits as index-addressed ops ----------------------------------------------------------
#
# An edit never copies a caller's entry into the patch: entries are replaced by ours, removed
# by index, or ours are appended. So the patch applies to exactly the list it was computed
# for, stays small, and always encodes (a caller's deeply nested value never reaches orjson's
# output depth limit). Replacements come first (indexes as computed), removals from the
# highest index down (each shifts only entries already handled), appends last.


def _edit_list(
    ops: list[patch.Op],
    prefix: bytes,
    field: str,
    present: bool,
    replace: dict[int, bytes],
    remove: list[int],
    append: patch.Appends | None,
) -> None:
    """Edit the list at ``prefix + field``; ``replace`` holds encoded values."""
    if not present:
        if append is not None:
            ops.append(append.create(prefix))
        return
    if replace or remove:
        path = prefix.decode() + field
        for i, value in replace.items():
            ops.append(patch.replace(f"{path}/{i}", value))
        for i in sorted(remove, reverse=True):
            ops.append(patch.remove(f"{path}/{i}"))
    if append is not None:
        ops.append(append.extend(prefix))


# -- volumes ---------------------------------------------------------------------------------


def _inject_volumes(
    spec: dict[str, Any], cfg: InjectConfig, ops: list[patch.Op], warnings: list[str]
) -> tuple[str, ...]:
    """Check and edit ``spec.volumes``; return the artifacts whose volume is added or replaced."""
    volumes = spec.get("volumes")
    if volumes is not None and (type(volumes) is not list or len(volumes) > MAX_VOLUMES):
        checked_list(volumes, "spec.volumes", MAX_VOLUMES)
    current: list[dict[str, Any]] = volumes or []
    positions: dict[str, list[int]] = {}
    for index, volume in enumerate(current):
        if type(volume) is not dict or type(name := volume.get("name")) is not str:
            check_volume(volume, index)
            name = volume["name"]
        if name in BY_VOLUME:
            positions.setdefault(name, []).append(index)
    replace: dict[int, bytes] = {}
    remove: list[int] = []
    append: list[str] = []
    changed: list[str] = []
    for desired in cfg.volumes:
        name = desired["name"]
        found = positions.get(name)
        if not found:
            append.append(name)
            changed.append(name)
            continue
        keep = next((i for i in found if current[i] == desired), None)
        if keep is None:
            keep = found[0]
            warnings.append(
                f"volume {name!r} replaced by the digest-pinned image volume "
                f"(was {_volume_source(current[keep])})"
            )
            replace[keep] = cfg.volume_json[name]
            changed.append(name)
        extras = [i for i in found if i != keep]
        if extras:
            remove.extend(extras)
            warnings.append(f"{_duplicates(len(extras))} volume {name!r} removed")
    run = cfg.volume_appends[tuple(append)] if append else None
    _edit_list(ops, b"", "/spec/volumes", volumes is not None, replace, remove, run)
    return tuple(sorted(changed))


def _volume_source(volume: dict[str, Any]) -> str:
    sources = [key[:40] for key in list(volume)[:8] if key != "name"]
    return ", ".join(sources) or "no source"


# -- mounts ----------------------------------------------------------------------------------


# Keyed by name, as are the per-call tables below: hashing the Artifact dataclass costs more
# than the rest of the per-mount work.
_MOUNTS: dict[str, dict[str, Any]] = {
    a.name: {"name": a.volume, "readOnly": True, "mountPath": a.mount_path}
    for a in (AGENTD, OPENCODE)
}
_MOUNT_JSON: dict[str, bytes] = {name: orjson.dumps(mount) for name, mount in _MOUNTS.items()}
_NAME = attrgetter("name")
_MOUNT_APPENDS: dict[tuple[str, ...], patch.Appends] = {
    names: patch.Appends("/volumeMounts", [_MOUNT_JSON[name] for name in names])
    for names in patch.subsets(list(_MOUNTS))
}


def _inject_mounts(
    container: dict[str, Any],
    prefix: bytes,
    wanted: tuple[Artifact, ...],
    ours: list[tuple[int, Artifact]],
    ops: list[patch.Op],
    warnings: list[str],
) -> None:
    """``ours``: the container's mounts of our volumes at their own mount points, already
    checked against the path rules."""
    mounts = container.get("volumeMounts")
    present = mounts is not None
    if not ours:  # a pod as its controller built it: only appends (``_edit_list``'s last step)
        run = _MOUNT_APPENDS[tuple(map(_NAME, wanted))]
        ops.append(run.extend(prefix) if present else run.create(prefix))
        return
    assert mounts is not None
    name = shown(container["name"])
    keep: dict[str, int] = {}
    for index, artifact in ours:  # an exact mount is kept in preference to any other
        if artifact.name not in keep and mounts[index] == _MOUNTS[artifact.name]:
            keep[artifact.name] = index
    replace: dict[int, bytes] = {}
    remove: list[int] = []
    unwanted: dict[str, int] = {}
    duplicates: dict[str, int] = {}
    for index, artifact in ours:
        if artifact not in wanted:
            remove.append(index)
            unwanted[artifact.name] = unwanted.get(artifact.name, 0) + 1
        elif artifact.name not in keep:
            keep[artifact.name] = index
            replace[index] = _MOUNT_JSON[artifact.name]
            warnings.append(
                f"mount {artifact.mount_path} in container {name} replaced by a read-only "
                f"mount of the {artifact.name} image volume"
            )
        elif keep[artifact.name] != index:
            remove.append(index)
            duplicates[artifact.name] = duplicates.get(artifact.name, 0) + 1
    # One warning per kind of change, however many entries it covers: the API server passes
    # warnings on to the client, and a pod with thousands of copies must not flood it.
    for artifact_name, count in unwanted.items():
        artifact = BY_VOLUME[artifact_name]
        warnings.append(
            f"{_times(count, 'mount')} of {artifact.volume!r} removed from container {name}: "
            f"{artifact.mount_path} belongs to {_owners(artifact)} only"
        )
    for artifact_name, count in duplicates.items():
        artifact = BY_VOLUME[artifact_name]
        warnings.append(f"{_duplicates(count)} {artifact.mount_path} mount removed from {name}")
    missing = _MOUNT_APPENDS.get(tuple([a.name for a in wanted if a.name not in keep]))
    _edit_list(ops, prefix, "/volumeMounts", present, replace, remove, missing)


def _times(count: int, one: str, many: str | None = None) -> str:
    """``"mount"`` for one, ``"3 mounts"`` for more; ``many`` when the plural is irregular."""
    return one if count == 1 else f"{count} {many or one + 's'}"


def _duplicates(count: int) -> str:
    return _times(count, "duplicate", "duplicate")


def _owners(artifact: Artifact) -> str:
    if artifact is OPENCODE:
        return f"the {MAIN_CONTAINER!r} container"
    return (
        f"{MAIN_CONTAINER!r}, the {SIDECAR_CONTAINER!r} sidecar and {PLATFORM_INIT_PREFIX}* inits"
    )


# -- env pins --------------------------------------------------------------------------------


def _supplied_pins(
    container: dict[str, Any], index: int, cfg: InjectConfig
) -> list[tuple[int, dict[str, Any]]]:
    """Check the ``workspace`` container's env; return its entries named like one of the pins."""
    env = container.get("env")
    if env is None:
        return []
    if type(env) is not list or len(env) > MAX_ENV:
        checked_list(env, f"{container_path('containers', index)}.env", MAX_ENV)
    wanted = cfg.env_by_name
    supplied: list[tuple[int, dict[str, Any]]] = []
    for position, entry in enumerate(env):
        if (
            type(entry) is not dict
            or type(name := entry.get("name")) is not str
            or type(entry.get("value", "")) is not str
        ):
            check_env(entry, "containers", index, position)
            name = entry["name"]
        if name in wanted:
            supplied.append((position, entry))
    return supplied


def _inject_env(
    container: dict[str, Any],
    prefix: bytes,
    cfg: InjectConfig,
    supplied: list[tuple[int, dict[str, Any]]],
    ops: list[patch.Op],
    warnings: list[str],
) -> None:
    """The eight pins, once each with the configured value; otherwise every supplied pin is
    removed and the eight are appended in their documented order."""
    wanted = cfg.env_by_name
    if (
        len(supplied) == len(wanted)
        and all(entry == wanted[entry["name"]] for _, entry in supplied)
        and len({entry["name"] for _, entry in supplied}) == len(wanted)
    ):
        return
    seen: dict[str, int] = {}
    for _, entry in supplied:
        env_name = entry["name"]
        if env_name not in seen and entry != wanted[env_name]:
            warnings.append(
                f"env {env_name} on container {MAIN_CONTAINER!r} replaced by the configured value"
            )
        seen[env_name] = seen.get(env_name, 0) + 1
    for env_name, count in seen.items():
        if count > 1:
            warnings.append(
                f"{_duplicates(count - 1)} env {env_name} removed from container {MAIN_CONTAINER!r}"
            )
    remove = [i for i, _ in supplied]
    present = container.get("env") is not None
    _edit_list(ops, prefix, "/env", present, {}, remove, cfg.env_appends)


# -- receipt annotation ----------------------------------------------------------------------

_RECEIPT_PATH = patch.encoded_path(
    "/metadata/annotations/" + DELIVERY_ANNOTATION.replace("~", "~0").replace("/", "~1")
).decode()


def _inject_receipt(pod: Pod, cfg: InjectConfig, ops: list[patch.Op]) -> None:
    annotations = pod["metadata"].get("annotations")
    if annotations is None:
        ops.append(patch.add("/metadata/annotations", cfg.annotations_json))
    elif annotations.get(DELIVERY_ANNOTATION) != cfg.receipt:
        edit = patch.replace if DELIVERY_ANNOTATION in annotations else patch.add
        ops.append(edit(_RECEIPT_PATH, cfg.receipt_json))
