"""Why a workspace pod is recycled: one reason, derived once, for staleness and drain metrics.

Pure. A pod records what it was built for (``ANNOTATION_RESTART_GENERATION``, its node's
``LABEL_ARCH``); a Workspace asking for another restart generation or architecture makes it
stale (``pod_is_stale`` says so in words, ``stale_reason`` as a ``RecycleReason``), and
credentials the controller can no longer vouch for recycle it too. The drain metrics label a
recycle by the same ``RecycleReason`` (``recycle_reason``), whose values are their label
values.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from controller.types import Obj
from controller.workspace.pod.names import PodBuildError
from wspin.core.contract import ARCHES
from wspin.core.workspace import WorkspaceSpec

ANNOTATION_RESTART_GENERATION: Final = "llmsafespaces.dev/restart-generation"
"""The ``spec.restartGeneration`` a pod was built for; a different value recreates the pod."""
LABEL_ARCH: Final = "kubernetes.io/arch"
DEFAULT_ARCH: Final = "amd64"


class RecycleReason(StrEnum):
    """Why a pod is replaced; the value is the drain metrics' ``reason`` label."""

    RESTART_GENERATION = "restart_generation"
    """A new ``spec.restartGeneration``."""
    ARCHITECTURE_DRIFT = "architecture_drift"
    """A ``spec.architecture`` the pod does not run on."""
    CREDENTIALS = "credentials"
    """Credentials the controller can no longer vouch for."""
    RESTART_GENERATION_USER_FORCED = "restart_generation_user_forced"
    """A new ``spec.restartGeneration`` whose drain the user skipped (force-recycle)."""


def architecture_of(ws: Obj) -> str:
    """``spec.architecture`` (``amd64`` when unset); PodBuildError for one not supported."""
    arch = WorkspaceSpec.of(ws.get("spec")).architecture or DEFAULT_ARCH
    if arch not in ARCHES:
        raise PodBuildError(
            f"spec.architecture {arch!r} is not supported; use one of {', '.join(ARCHES)}"
        )
    return str(arch)


def restart_generation_of(ws: Obj) -> str:
    """``spec.restartGeneration`` in decimal ("0" when unset); PodBuildError for anything but
    a whole number >= 0."""
    value = WorkspaceSpec.of(ws.get("spec")).restart_generation or 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise PodBuildError(f"spec.restartGeneration must be a whole number >= 0 (got {value!r})")
    return str(value)


def _stale(pod: Obj, ws: Obj) -> tuple[RecycleReason, str] | None:
    """Why ``pod`` is stale and the value the Workspace asks for now, or None."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    generation = restart_generation_of(ws)
    if annotations.get(ANNOTATION_RESTART_GENERATION, "0") != generation:
        return RecycleReason.RESTART_GENERATION, generation
    have_arch = ((pod.get("spec") or {}).get("nodeSelector") or {}).get(LABEL_ARCH)
    arch = architecture_of(ws)
    if have_arch != arch:
        return RecycleReason.ARCHITECTURE_DRIFT, arch
    return None


def stale_reason(pod: Obj, ws: Obj) -> RecycleReason | None:
    """Why an existing pod no longer matches its Workspace, or None.

    Only a new ``restartGeneration`` or ``architecture`` makes a pod stale: pod specs are
    immutable, and nothing else justifies interrupting a running workspace (the reconciler
    also replaces a pod whose credentials it cannot vouch for, ``credentials.pod_credentials``).
    """
    stale = _stale(pod, ws)
    return stale[0] if stale is not None else None


_WORDS: Final = {
    RecycleReason.RESTART_GENERATION: "restartGeneration changed to {}",
    RecycleReason.ARCHITECTURE_DRIFT: "architecture changed to {}",
}


def pod_is_stale(pod: Obj, ws: Obj) -> str | None:
    """``stale_reason`` in words (for the log and the status), or None."""
    stale = _stale(pod, ws)
    return _WORDS[stale[0]].format(stale[1]) if stale is not None else None


def recycle_reason(pod: Obj, ws: Obj, *, untrusted: bool) -> RecycleReason:
    """Why a pod being recycled is: its credentials when ``untrusted``, else why it is stale
    (a recycle that is neither is counted as architecture drift, as it always was)."""
    if untrusted:
        return RecycleReason.CREDENTIALS
    return stale_reason(pod, ws) or RecycleReason.ARCHITECTURE_DRIFT
