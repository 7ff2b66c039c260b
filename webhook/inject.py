"""The pod injector: a pure function from (pod, configuration) to JSON-patch ops and warnings.

It serves both the admission webhook and the offline ``wspin inject`` command, so the two can
never disagree. No I/O, no logging, no clock, no environment: everything it needs arrives in
``InjectConfig``.

Ops are built directly rather than by diffing two pod copies: diffing costs a deep copy and
emits spurious ops. The field types and size bounds are checked first (``podshape``), then the
mount path rules (``mountpaths``), so the ops below index only into lists that exist.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, TypedDict

from webhook.mountpaths import BY_VOLUME, delivery_mounts, shown
from webhook.podshape import CONTAINER_KINDS, check_workspace_pod, checked_labels
from wspin.contract import (
    AGENTD,
    ARCHES,
    DELIVERY_ANNOTATION,
    LABEL_APP,
    LABEL_APP_VALUE,
    LABEL_COMPONENT,
    LABEL_COMPONENT_VALUE,
    LABEL_WORKSPACE,
    MAIN_CONTAINER,
    OPENCODE,
    PLATFORM_INIT_PREFIX,
    SIDECAR_CONTAINER,
    Artifact,
)
from wspin.delivery import ResolvedArtifact
from wspin.errors import AdmissionDenied

Pod = dict[str, Any]


class PatchOp(TypedDict, total=False):
    op: Literal["add", "replace", "remove"]
    path: str
    value: Any


@dataclass(frozen=True)
class InjectConfig:
    """What the injector writes into a workspace pod: both artifacts, resolved and checked."""

    agentd: ResolvedArtifact
    opencode: ResolvedArtifact

    # The desired values below are computed once per configuration, not once per pod: the
    # webhook answers every admission request with the same configuration.

    @property
    def artifacts(self) -> tuple[ResolvedArtifact, ResolvedArtifact]:
        return (self.agentd, self.opencode)

    @cached_property
    def receipt(self) -> str:
        """The receipt annotation value: artifact → digest, compact JSON with sorted keys."""
        return json.dumps(
            {r.artifact.name: f"sha256:{r.digest}" for r in self.artifacts},
            sort_keys=True,
            separators=(",", ":"),
        )

    @cached_property
    def digests(self) -> str:
        """Both artifacts with their short digests, as decision messages show them."""
        return ", ".join(f"{r.artifact.name}@sha256:{r.digest[:12]}" for r in self.artifacts)

    @cached_property
    def volumes(self) -> tuple[dict[str, Any], ...]:
        """The two image volumes, digest-pinned, pulled only when a node lacks them."""
        return tuple(
            {
                "name": r.artifact.volume,
                "image": {"reference": r.image, "pullPolicy": "IfNotPresent"},
            }
            for r in self.artifacts
        )

    @cached_property
    def env(self) -> tuple[dict[str, str], ...]:
        """The eight pins of the ``workspace`` container, in the order the verifier documents."""
        env: list[dict[str, str]] = []
        for resolved in self.artifacts:
            artifact = resolved.artifact
            env.append({"name": artifact.marker_env, "value": "1"})
            env.append({"name": artifact.binary_env, "value": artifact.binary_path})
            for arch in ARCHES:
                env.append(
                    {"name": artifact.sha256_env(arch), "value": resolved.pins.for_arch(arch)}
                )
        return tuple(env)

    @cached_property
    def env_by_name(self) -> dict[str, dict[str, str]]:
        return {entry["name"]: entry for entry in self.env}


@dataclass(frozen=True)
class Injection:
    """The injector's answer. ``skipped`` says why a pod needs no delivery at all."""

    patch: tuple[PatchOp, ...] = ()
    warnings: tuple[str, ...] = ()
    skipped: str | None = None
    artifacts: tuple[str, ...] = ()
    """Artifacts whose image volume the patch adds or replaces (the injections metric)."""

    @property
    def changed(self) -> bool:
        return bool(self.patch)


def is_workspace_labelled(pod: Pod) -> bool:
    """The pod carries the three workspace labels the Workspace reconciler sets."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return (
        labels.get(LABEL_APP) == LABEL_APP_VALUE
        and labels.get(LABEL_COMPONENT) == LABEL_COMPONENT_VALUE
        and bool(labels.get(LABEL_WORKSPACE))
    )


def workspace_pod_problem(pod: Pod) -> str | None:
    """Why a workspace-labelled pod cannot receive delivery, or None when it can."""
    containers = (pod.get("spec") or {}).get("containers") or []
    if not any(c.get("name") == MAIN_CONTAINER for c in containers):
        names = ", ".join(repr(c.get("name")) for c in containers) or "none"
        return (
            f"pod carries the workspace labels ({LABEL_APP}={LABEL_APP_VALUE}, "
            f"{LABEL_COMPONENT}={LABEL_COMPONENT_VALUE}, {LABEL_WORKSPACE}) but has no container "
            f"named {MAIN_CONTAINER!r} (containers: {names}); agentd and opencode are delivered "
            f"into that container: name the main container {MAIN_CONTAINER!r} or remove the labels"
        )
    return None


def inject(pod: Pod, cfg: InjectConfig) -> Injection:
    """Compute the patch that gives ``pod`` the delivery wiring of ``cfg``.

    Not a workspace pod → skipped, no patch. A field of the wrong type or a list over its
    bound → ``AdmissionDenied`` (400) naming it (``podshape``). Labelled but without a
    ``workspace`` container, or a mount that breaks the path rules (``mountpaths``) →
    ``AdmissionDenied``. An already-wired pod → empty patch (plus the receipt annotation if
    that is missing). Linear in the size of the pod.
    """
    checked_labels(pod)
    if not is_workspace_labelled(pod):
        return Injection(skipped="not a workspace pod (workspace labels absent)")
    check_workspace_pod(pod)
    problem = workspace_pod_problem(pod)
    if problem:
        raise AdmissionDenied(problem)

    spec = pod["spec"]
    ops: list[PatchOp] = []
    warnings: list[str] = []
    artifacts = _inject_volumes(spec, cfg, ops, warnings)
    for kind in CONTAINER_KINDS:
        for index, container in enumerate(spec.get(kind) or ()):
            ours = delivery_mounts(kind, container)
            if kind == "ephemeralContainers":
                continue  # checked only: the API server refuses them on CREATE
            wanted = _artifacts_for(container, kind)
            if not wanted and not ours:
                continue  # most containers: nothing of ours to add or remove
            path = f"/spec/{kind}/{index}"
            _inject_mounts(container, path, wanted, ours, ops, warnings)
            if kind == "containers" and container["name"] == MAIN_CONTAINER:
                _inject_env(container, path, cfg, ops, warnings)
    _inject_receipt(pod, cfg, ops)
    return Injection(patch=tuple(ops), warnings=tuple(warnings), artifacts=artifacts)


# -- which container gets which mount --------------------------------------------------------


def _artifacts_for(container: dict[str, Any], kind: str) -> tuple[Artifact, ...]:
    """The delivery mounts a container must have."""
    name: str = container["name"]
    if kind == "containers":
        return (AGENTD, OPENCODE) if name == MAIN_CONTAINER else ()
    # The agentd native sidecar and the platform-* init containers run /agentd; opencode is
    # the workspace container's alone.
    if name == SIDECAR_CONTAINER or name.startswith(PLATFORM_INIT_PREFIX):
        return (AGENTD,)
    return ()


# -- list edits as index-addressed ops ----------------------------------------------------------
#
# An edit never copies a caller's entry into the patch: entries are replaced by ours, removed
# by index, or ours are appended. So the patch applies to exactly the list it was computed
# for, stays small, and always encodes (a caller's deeply nested value never reaches orjson's
# output depth limit). Replacements come first (indexes as computed), removals from the
# highest index down (each shifts only entries already handled), appends last.


def _edit_list(
    ops: list[PatchOp],
    path: str,
    present: bool,
    replace: dict[int, dict[str, Any]],
    remove: list[int],
    append: list[dict[str, Any]],
) -> None:
    if not present:
        if append:
            ops.append({"op": "add", "path": path, "value": append})
        return
    ops.extend({"op": "replace", "path": f"{path}/{i}", "value": v} for i, v in replace.items())
    ops.extend({"op": "remove", "path": f"{path}/{i}"} for i in sorted(remove, reverse=True))
    ops.extend({"op": "add", "path": f"{path}/-", "value": v} for v in append)


# -- volumes ---------------------------------------------------------------------------------


def _inject_volumes(
    spec: dict[str, Any], cfg: InjectConfig, ops: list[PatchOp], warnings: list[str]
) -> tuple[str, ...]:
    """Edit ``spec.volumes``; return the artifacts whose volume is added or replaced."""
    current: list[dict[str, Any]] = spec.get("volumes") or []
    positions: dict[str, list[int]] = {}
    for index, volume in enumerate(current):
        if volume["name"] in BY_VOLUME:
            positions.setdefault(volume["name"], []).append(index)
    replace: dict[int, dict[str, Any]] = {}
    remove: list[int] = []
    append: list[dict[str, Any]] = []
    replaced: list[str] = []
    for desired in cfg.volumes:
        found = positions.get(desired["name"], [])
        if not found:
            append.append(_copy(desired))
            continue
        keep = next((i for i in found if current[i] == desired), None)
        if keep is None:
            keep = found[0]
            warnings.append(
                f"volume {desired['name']!r} replaced by the digest-pinned image volume "
                f"(was {_volume_source(current[keep])})"
            )
            replace[keep] = _copy(desired)
            replaced.append(desired["name"])
        extras = [i for i in found if i != keep]
        if extras:
            remove.extend(extras)
            warnings.append(f"{_duplicates(len(extras))} volume {desired['name']!r} removed")
    _edit_list(ops, "/spec/volumes", spec.get("volumes") is not None, replace, remove, append)
    changed = [v["name"] for v in append] + [current_name for current_name in replaced]
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


def _inject_mounts(
    container: dict[str, Any],
    path: str,
    wanted: tuple[Artifact, ...],
    ours: list[tuple[int, Artifact]],
    ops: list[PatchOp],
    warnings: list[str],
) -> None:
    """``ours``: the container's mounts of our volumes at their own mount points, already
    checked against the path rules."""
    mounts: list[dict[str, Any]] = container.get("volumeMounts") or []
    name = shown(container["name"])
    keep: dict[str, int] = {}
    for index, artifact in ours:  # an exact mount is kept in preference to any other
        if artifact.name not in keep and mounts[index] == _MOUNTS[artifact.name]:
            keep[artifact.name] = index
    replace: dict[int, dict[str, Any]] = {}
    remove: list[int] = []
    unwanted: dict[str, int] = {}
    duplicates: dict[str, int] = {}
    for index, artifact in ours:
        if artifact not in wanted:
            remove.append(index)
            unwanted[artifact.name] = unwanted.get(artifact.name, 0) + 1
        elif artifact.name not in keep:
            keep[artifact.name] = index
            replace[index] = dict(_MOUNTS[artifact.name])
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
    append = [dict(_MOUNTS[a.name]) for a in wanted if a.name not in keep]
    present = container.get("volumeMounts") is not None
    _edit_list(ops, f"{path}/volumeMounts", present, replace, remove, append)


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


def _inject_env(
    container: dict[str, Any],
    path: str,
    cfg: InjectConfig,
    ops: list[PatchOp],
    warnings: list[str],
) -> None:
    """The eight pins, once each with the configured value; otherwise every supplied pin is
    removed and the eight are appended in their documented order."""
    wanted = cfg.env_by_name
    current: list[dict[str, Any]] = container.get("env") or []
    supplied = [(i, entry) for i, entry in enumerate(current) if entry["name"] in wanted]
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
    append = [_copy(entry) for entry in cfg.env]
    _edit_list(ops, f"{path}/env", container.get("env") is not None, {}, remove, append)


# -- receipt annotation ----------------------------------------------------------------------


def _inject_receipt(pod: Pod, cfg: InjectConfig, ops: list[PatchOp]) -> None:
    metadata = pod["metadata"]
    annotations = metadata.get("annotations")
    receipt = cfg.receipt
    if annotations is None:
        ops.append(
            {"op": "add", "path": "/metadata/annotations", "value": {DELIVERY_ANNOTATION: receipt}}
        )
    elif annotations.get(DELIVERY_ANNOTATION) != receipt:
        key = DELIVERY_ANNOTATION.replace("~", "~0").replace("/", "~1")
        verb: Literal["add", "replace"] = "replace" if DELIVERY_ANNOTATION in annotations else "add"
        ops.append({"op": verb, "path": f"/metadata/annotations/{key}", "value": receipt})


def _copy(value: dict[str, Any]) -> dict[str, Any]:
    """A patch value the caller may mutate without touching the cached configuration."""
    return {k: dict(v) if isinstance(v, dict) else v for k, v in value.items()}
