"""Verify-failure detection: exit codes 81 to 84 of the workspace container → conditions.

Pure. The in-pod supervisor verifies the injected binaries against the pod's env pins and
exits 81/82 (agentd) or 83/84 (opencode) when they do not match. Detection is gated on the
pod's own env marker, per artifact: a pod that never ran the check is never marked verified
and never blamed for an exit code it did not mean.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from controller.toolkit.conditions import condition
from controller.types import Obj
from wspin.core.contract import (
    AGENTD,
    EXIT_AGENTD_MISMATCH,
    EXIT_AGENTD_MISSING,
    EXIT_OPENCODE_MISMATCH,
    EXIT_OPENCODE_MISSING,
    MAIN_CONTAINER,
    OPENCODE,
    Artifact,
)
from wspin.core.workspace_pod import parse_receipt

VerifyKind = Literal["verify_failed", "overlay_missing"]

UNKNOWN: Final = "unknown"
_DIGEST12 = re.compile(r"sha256:([0-9a-f]{12})[0-9a-f]*")


@dataclass(frozen=True)
class FailureKind:
    """What one exit code means: which artifact, the condition reason and the metric outcome."""

    artifact: Artifact
    reason: str
    outcome: VerifyKind


EXIT_CODES: Final[dict[int, FailureKind]] = {
    EXIT_AGENTD_MISMATCH: FailureKind(AGENTD, "AgentdVerificationFailed", "verify_failed"),
    EXIT_AGENTD_MISSING: FailureKind(AGENTD, "AgentdOverlayMissing", "overlay_missing"),
    EXIT_OPENCODE_MISMATCH: FailureKind(OPENCODE, "OpencodeVerificationFailed", "verify_failed"),
    EXIT_OPENCODE_MISSING: FailureKind(OPENCODE, "OpencodeOverlayMissing", "overlay_missing"),
}


def condition_type(artifact: Artifact) -> str:
    """``AgentdVerified`` / ``OpencodeVerified``."""
    return f"{artifact.name.capitalize()}Verified"


@dataclass(frozen=True)
class Termination:
    """The exit the detector attributes the pod's state to."""

    container: str
    exit_code: int
    message: str
    restart_count: int


@dataclass(frozen=True)
class VerifyFailure:
    """One detected verify failure, with everything the condition, Event and metric need."""

    kind: FailureKind
    exit_code: int
    message: str
    node: str
    image: str
    digest: str
    restart_count: int

    @property
    def artifact(self) -> Artifact:
        return self.kind.artifact


def has_marker(pod: Obj, artifact: Artifact) -> bool:
    """The workspace container carries ``<ARTIFACT>_IMAGE_VOLUME=1`` (exactly "1")."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") != MAIN_CONTAINER:
            continue
        # Duplicate names: the last entry wins in the kubelet, so it wins here too.
        value = None
        for env in container.get("env") or []:
            if env.get("name") == artifact.marker_env:
                value = env.get("value")
        return value == "1"
    return False


def termination_of(pod: Obj) -> Termination | None:
    """The ``workspace`` container's current terminated state, else its last termination.

    Only that container runs the verifier, so only its exit code means anything: another
    container's exit (the kubelet lists statuses by name, so ``a-helper`` would come first)
    must neither hide the verifier's code nor be read as one. Init containers and native
    sidecars (``initContainerStatuses``) are not examined: one attribution only.
    """
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") != MAIN_CONTAINER:
            continue
        terminated = (status.get("state") or {}).get("terminated") or (
            (status.get("lastState") or {}).get("terminated")
        )
        if terminated:
            return Termination(
                container=str(status.get("name", "")),
                exit_code=int(terminated.get("exitCode", 0)),
                message=str(terminated.get("message") or "").strip(),
                restart_count=int(status.get("restartCount") or 0),
            )
    return None


def injected_image(pod: Obj, artifact: Artifact) -> str:
    """The image the webhook injected for ``artifact`` (its image volume), or ""."""
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if volume.get("name") == artifact.volume and isinstance(volume.get("image"), dict):
            return str(volume["image"].get("reference") or "")
    return ""


def digest_label(pod: Obj, artifact: Artifact) -> str:
    """12 hex of the injected image's digest: from the image volume, else from the webhook's
    receipt annotation (``{"agentd": "sha256:…"}``), else ``unknown``."""
    match = _DIGEST12.search(injected_image(pod, artifact).rpartition("@")[2])
    if match:
        return match.group(1)
    match = _DIGEST12.search(parse_receipt(pod).get(artifact.name, ""))
    if match:
        return match.group(1)
    return UNKNOWN


def detect_failure(pod: Obj) -> VerifyFailure | None:
    """The verify failure ``pod`` shows, or None (no exit, an unmapped code such as 137, 87
    or 88, or an artifact whose marker the pod does not carry)."""
    termination = termination_of(pod)
    if termination is None:
        return None
    kind = EXIT_CODES.get(termination.exit_code)
    if kind is None or not has_marker(pod, kind.artifact):
        return None
    message = termination.message or (
        f"{kind.artifact.name} integrity failure: exit code {termination.exit_code}"
    )
    return VerifyFailure(
        kind=kind,
        exit_code=termination.exit_code,
        message=message,
        node=str((pod.get("spec") or {}).get("nodeName") or UNKNOWN),
        image=injected_image(pod, kind.artifact) or UNKNOWN,
        digest=digest_label(pod, kind.artifact),
        restart_count=termination.restart_count,
    )


def failed_condition(failure: VerifyFailure, generation: int) -> Obj:
    return condition(
        condition_type(failure.artifact), "False", failure.kind.reason, failure.message, generation
    )


def verified_condition(artifact: Artifact, generation: int) -> Obj:
    return condition(
        condition_type(artifact),
        "True",
        condition_type(artifact),
        f"{artifact.name} binary matched its pinned sha256",
        generation,
    )


def event_message(failure: VerifyFailure) -> str:
    """The Warning Event text: node, image, restart count and the verifier's own message."""
    return (
        f"{failure.kind.reason}: node={failure.node} image={failure.image} "
        f"restarts={failure.restart_count} exit={failure.exit_code}: {failure.message}"
    )
