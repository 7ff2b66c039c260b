"""The pod injector: a pure function from (pod, configuration) to JSON-patch ops and warnings.

It serves both the admission webhook and the offline ``wspin inject`` command, so the two can
never disagree. No I/O, no logging, no clock, no environment: everything it needs arrives in
``InjectConfig``.

Ops are built directly rather than by diffing two pod copies (diffing costs a deep copy and
emits spurious ops, DESIGN.md §3). Lists that only grow get ``add …/-`` ops; a list where a
caller-supplied entry must be replaced or removed is replaced whole, so no op depends on an
index that an earlier op shifted.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, TypedDict

from wspin.contract import (
    AGENTD,
    ARCHES,
    DELIVERY_ANNOTATION,
    MAIN_CONTAINER,
    OPENCODE,
    PLATFORM_INIT_PREFIX,
    SIDECAR_CONTAINER,
    Artifact,
)
from wspin.delivery import ResolvedArtifact
from wspin.errors import AdmissionDenied
from wspin.workspace_pod import (
    SELECTOR,
    artifacts_for,
    build_receipt,
    is_workspace_pod,
    workspace_pod_problem,
)

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
        return build_receipt({r.artifact.name: r.digest for r in self.artifacts})

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

    @property
    def changed(self) -> bool:
        return bool(self.patch)


def inject(pod: Pod, cfg: InjectConfig) -> Injection:
    """Compute the patch that gives ``pod`` the delivery wiring of ``cfg``.

    Not a workspace pod → skipped, no patch. Labelled but without the Workspace label or a
    ``workspace`` container (``workspace_pod_problem``), or a foreign volume mounted at
    ``/agentd``/``/opencode`` → ``AdmissionDenied``.
    An already-wired pod → empty patch (plus the receipt annotation if that is missing).
    """
    if not is_workspace_pod(pod):
        return Injection(skipped=f"not a workspace pod (labels {SELECTOR} absent)")
    problem = workspace_pod_problem(pod)
    if problem:
        raise AdmissionDenied(problem)

    spec = pod.get("spec") or {}
    ops: list[PatchOp] = []
    warnings: list[str] = []
    _inject_volumes(spec, cfg, ops, warnings)
    for kind in ("containers", "initContainers"):
        for index, container in enumerate(spec.get(kind) or []):
            wanted = artifacts_for(str(container.get("name", "")), kind)
            if not wanted and not _mounts_ours(container):
                continue  # most containers: nothing of ours to add or remove
            _inject_mounts(container, f"/spec/{kind}/{index}", wanted, ops, warnings)
            if kind == "containers" and container.get("name") == MAIN_CONTAINER:
                _inject_env(container, f"/spec/{kind}/{index}", cfg, ops, warnings)
    _inject_receipt(pod, cfg, ops)
    return Injection(patch=tuple(ops), warnings=tuple(warnings))


# -- volumes ---------------------------------------------------------------------------------


def _inject_volumes(
    spec: dict[str, Any], cfg: InjectConfig, ops: list[PatchOp], warnings: list[str]
) -> None:
    current: list[dict[str, Any]] = list(spec.get("volumes") or [])
    updated = list(current)
    for desired in cfg.volumes:
        positions = [i for i, v in enumerate(updated) if v.get("name") == desired["name"]]
        if not positions:
            updated.append(_copy(desired))
            continue
        first = positions[0]
        if updated[first] != desired:
            warnings.append(
                f"volume {desired['name']!r} replaced by the digest-pinned image volume "
                f"(was {_volume_source(updated[first])})"
            )
            updated[first] = _copy(desired)
        for extra in reversed(positions[1:]):
            del updated[extra]
            warnings.append(f"duplicate volume {desired['name']!r} removed")
    _write_list(ops, "/spec/volumes", spec.get("volumes") is not None, current, updated)


def _volume_source(volume: dict[str, Any]) -> str:
    sources = [key for key in volume if key != "name"]
    return ", ".join(sources) or "no source"


# -- mounts ----------------------------------------------------------------------------------


_MOUNTS: dict[Artifact, dict[str, Any]] = {
    a: {"name": a.volume, "readOnly": True, "mountPath": a.mount_path} for a in (AGENTD, OPENCODE)
}


def _desired_mount(artifact: Artifact) -> dict[str, Any]:
    return dict(_MOUNTS[artifact])


def _inject_mounts(
    container: dict[str, Any],
    path: str,
    wanted: tuple[Artifact, ...],
    ops: list[PatchOp],
    warnings: list[str],
) -> None:
    current: list[dict[str, Any]] = container.get("volumeMounts") or []
    name = container.get("name")
    updated: list[dict[str, Any]] = []
    for mount in current:
        artifact = _artifact_of_mount(mount)
        if artifact is None:
            updated.append(mount)
            continue
        if mount.get("mountPath") == artifact.mount_path and mount.get("name") != artifact.volume:
            raise AdmissionDenied(
                f"container {name!r} mounts volume {mount.get('name')!r} at "
                f"{artifact.mount_path}, where the {artifact.name} image volume must be mounted",
                f"remove that mount or move it off {artifact.mount_path}",
            )
        if artifact not in wanted:
            warnings.append(
                f"mount of {artifact.volume!r} removed from container {name!r}: "
                f"{artifact.mount_path} belongs to {_owners(artifact)} only"
            )
            continue
        if mount != _MOUNTS[artifact]:
            if any(m.get("mountPath") == artifact.mount_path for m in updated):
                warnings.append(f"duplicate {artifact.mount_path} mount removed from {name!r}")
                continue
            warnings.append(
                f"mount {artifact.mount_path} in container {name!r} replaced by a read-only "
                f"mount of the {artifact.name} image volume"
            )
            updated.append(_desired_mount(artifact))
            continue
        updated.append(mount)
    for artifact in wanted:
        if _MOUNTS[artifact] not in updated:
            updated.append(_desired_mount(artifact))
    _write_list(
        ops, f"{path}/volumeMounts", container.get("volumeMounts") is not None, current, updated
    )


def _artifact_of_mount(mount: dict[str, Any]) -> Artifact | None:
    """The artifact a mount belongs to, by volume name or by mount path."""
    return _BY_VOLUME.get(mount.get("name")) or _BY_MOUNT_PATH.get(mount.get("mountPath"))


def _mounts_ours(container: dict[str, Any]) -> bool:
    """Whether any mount uses an artifact's volume name or mount path (a plain loop: this runs
    for every container of every workspace pod)."""
    for mount in container.get("volumeMounts") or ():
        if mount.get("name") in _BY_VOLUME or mount.get("mountPath") in _BY_MOUNT_PATH:
            return True
    return False


# Lookup tables: the hot loop runs once per mount of every container of every pod.
_BY_VOLUME: dict[Any, Artifact] = {a.volume: a for a in (AGENTD, OPENCODE)}
_BY_MOUNT_PATH: dict[Any, Artifact] = {a.mount_path: a for a in (AGENTD, OPENCODE)}


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
    wanted = cfg.env_by_name
    current: list[dict[str, Any]] = container.get("env") or []
    supplied = [entry for entry in current if entry.get("name") in wanted]
    if (
        len(supplied) == len(wanted)
        and all(e == wanted[e["name"]] for e in supplied)
        and len({e["name"] for e in supplied}) == len(wanted)
    ):
        return  # every pin present once, with the configured value
    kept = [entry for entry in current if entry.get("name") not in wanted]
    seen: set[str] = set()
    for entry in supplied:
        env_name = str(entry.get("name"))
        if env_name in seen:
            warnings.append(f"duplicate env {env_name} removed from container {MAIN_CONTAINER!r}")
        elif entry != wanted[env_name]:
            warnings.append(
                f"env {env_name} on container {MAIN_CONTAINER!r} replaced by the configured value"
            )
        seen.add(env_name)
    desired = [_copy(entry) for entry in cfg.env]
    _write_list(ops, f"{path}/env", container.get("env") is not None, current, kept + desired)


# -- receipt annotation ----------------------------------------------------------------------


def _inject_receipt(pod: Pod, cfg: InjectConfig, ops: list[PatchOp]) -> None:
    metadata = pod.get("metadata") or {}
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


# -- list writing ----------------------------------------------------------------------------


def _write_list(
    ops: list[PatchOp],
    path: str,
    present: bool,
    current: list[dict[str, Any]],
    updated: list[dict[str, Any]],
) -> None:
    """Append-only growth → ``add …/-`` per item; anything else → one whole-list replace."""
    if updated == current and present:
        return
    if not present or (not current and not updated):
        if updated:
            ops.append({"op": "add", "path": path, "value": updated})
        return
    if updated[: len(current)] == current:
        ops.extend(
            {"op": "add", "path": f"{path}/-", "value": item} for item in updated[len(current) :]
        )
        return
    ops.append({"op": "replace", "path": path, "value": updated})
