"""Platform boot failures: the platform's own init containers or the agentd sidecar failing.
Pure.

``platform-init``, ``platform-bootstrap`` and ``platform-materialize`` run the platform's code
from the agentd image before the workspace starts; in sidecar mode the ``agentd`` sidecar
supervises it. When one of them is failing *now* the Workspace gets ``BootReady=False`` with
reason ``PlatformBootFailed`` and a message naming the container, its exit code and what it
said; once per episode an Event and a metric increment follow (``recovery_report``). The pod
is kept: replacing it would run the same platform code again, so a boot failure is the
platform team's to fix, never a recovery attempt or a pod recreation loop.

"Now" matters: an init container that failed and then completed, or a sidecar that crashed
once and runs again, is not failing, so it is not reported (and a report clears).
``BootReady=True`` is written once the Workspace is Active.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from controller.toolkit import episodes
from controller.toolkit.conditions import condition
from controller.types import Obj
from controller.workspace.recovery import failures as fl
from wspin.core.contract import (
    PLATFORM_BOOTSTRAP,
    PLATFORM_INIT,
    PLATFORM_MATERIALIZE,
    SIDECAR_CONTAINER,
)

BOOT_READY: Final = "BootReady"
PLATFORM_BOOT_FAILED: Final = "PlatformBootFailed"
CONTAINERS: Final = (PLATFORM_INIT, PLATFORM_BOOTSTRAP, PLATFORM_MATERIALIZE, SIDECAR_CONTAINER)
"""The boot phase's containers, in start order (the metric's ``container`` label values)."""
MESSAGE_LIMIT: Final = 512


@dataclass(frozen=True)
class BootFailure:
    """The boot container failing now and how it last ended."""

    container: str
    exit_code: int
    reason: str
    message: str
    node: str
    restarts: int

    def describe(self) -> str:
        """``platform-init: exit 1 (Error): <its message>``."""
        said = " ".join(self.message.split())[:MESSAGE_LIMIT]
        ended = f"exit {self.exit_code}" + (f" ({self.reason})" if self.reason else "")
        return f"{self.container}: {ended}: {said or 'it wrote no termination message'}"


def _failing(status: Obj, *, sidecar: bool) -> Obj | None:
    """How the container last ended, when that ending is still its state: terminated non-zero,
    or waiting to restart after a non-zero exit; an init container re-running after one is
    still in the episode. A sidecar running again has recovered."""
    current = fl.terminated(status)
    if current is not None:
        return current if fl.exit_code(current) != 0 else None
    last = fl.terminated(status, "lastState")
    if last is None or fl.exit_code(last) == 0:
        return None
    if fl.running(status) and (sidecar or status.get("ready") is True):
        return None
    return last


def boot_failure(pod: Obj) -> BootFailure | None:
    """The first boot container failing now, or None."""
    spec = pod.get("spec")
    node = str(spec.get("nodeName") or "") if isinstance(spec, dict) else ""
    by_name = {str(s.get("name")): s for s in fl.statuses(pod, "initContainerStatuses")}
    for name in CONTAINERS:
        status = by_name.get(name)
        if status is None:
            continue
        ended = _failing(status, sidecar=name == SIDECAR_CONTAINER)
        if ended is None:
            continue
        restarts = status.get("restartCount")
        return BootFailure(
            container=name,
            exit_code=fl.exit_code(ended),
            reason=str(ended.get("reason") or ""),
            message=str(ended.get("message") or "").strip(),
            node=node,
            restarts=restarts if isinstance(restarts, int) and restarts > 0 else 0,
        )
    return None


def failed_condition(failure: BootFailure, generation: int, message: str) -> Obj:
    """``BootReady=False/PlatformBootFailed`` with ``message`` (``describe``, redacted)."""
    return condition(BOOT_READY, "False", PLATFORM_BOOT_FAILED, message, generation)


def ready_condition(generation: int) -> Obj:
    return condition(
        BOOT_READY, "True", BOOT_READY, "the platform's boot containers completed", generation
    )


def reported(conditions: list[Obj], container: str) -> bool:
    """Whether ``conditions`` already report a boot failure of ``container`` (same episode)."""
    prefix = f"{container}:"
    return episodes.recorded_as(
        BOOT_READY,
        status="False",
        reason=PLATFORM_BOOT_FAILED,
        message=lambda message: message.startswith(prefix),
    )(conditions)


def event_message(failure: BootFailure, described: str) -> str:
    """The Warning Event: container, node, exit, restarts and what it said."""
    return (
        f"{PLATFORM_BOOT_FAILED}: container={failure.container} node={failure.node or 'unknown'} "
        f"exit={failure.exit_code} restarts={failure.restarts}: {described}"
    )
