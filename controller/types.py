"""The small contracts between the runtime and the reconcilers, and between reconcilers.

A reconciler gets a key and returns a requeue decision; it never sees events, queues or
leases (controller-runtime's shape). Errors: ``TransientError`` → retry with backoff,
``TerminalError`` → log and stop, anything else → retry with backoff.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from wspin.core.objects import Obj, ObjectKey

__all__ = [
    "Listable",
    "Obj",
    "ObjectKey",
    "ObjectReader",
    "Reconciler",
    "Requeue",
    "StagingCleanup",
    "StagingPass",
    "StagingReport",
]


@dataclass(frozen=True)
class Requeue:
    """Come back after ``after`` seconds (a real interval, not the error backoff)."""

    after: float


class Reconciler(Protocol):
    """One controller's logic: level-based, idempotent, not-found counts as success."""

    name: str

    async def reconcile(self, key: ObjectKey) -> Requeue | None: ...


class ObjectReader(Protocol):
    """Read access to one kind's objects as plain dicts (an informer cache, or the API)."""

    def get(self, key: ObjectKey) -> Obj | None: ...

    def list(
        self, namespace: str | None = None, labels: dict[str, str] | None = None
    ) -> list[Obj]: ...


class Listable(Protocol):
    """Every object of one kind as plain dicts: what a metrics collector reads from an
    informer cache at scrape time (an ``ObjectReader`` is one)."""

    def list(self) -> list[Obj]: ...


@dataclass(frozen=True)
class StagingReport:
    """What a per-workspace staging pass wants on the Workspace's status."""

    conditions: list[Obj] = field(default_factory=list)
    """Conditions to set (type, status, reason, message)."""
    remove: tuple[str, ...] = ()
    """Condition types to drop (the cause they reported is gone)."""
    error: Exception | None = None
    """Raised after the status is written, so the reconcile is retried with backoff while
    what the pass recorded (e.g. an incomplete revocation) is already visible."""
    requeue_after: float | None = None
    """Seconds until the pass has something due with no event to announce it (a token to
    renew, a cache to refresh, a revocation to re-check); None: nothing is due."""


class StagingPass(Protocol):
    """The per-workspace relay staging pass the Workspace reconciler runs, when relay staging
    is armed, in every phase but Terminating (``controller.workspace.reconcile.staging_phases``).

    Returns the conditions it wants on the Workspace (a bare list means "set these"); it
    must never put a staged key in a condition, Event or log line.
    """

    async def run(self, ws: Obj) -> list[Obj] | StagingReport: ...


@runtime_checkable
class StagingCleanup(Protocol):
    """A staging pass that also cleans up what it staged when its Workspace is deleted;
    it must not raise (termination is never blocked on relay cleanup)."""

    async def cleanup(self, ws: Obj) -> None: ...
