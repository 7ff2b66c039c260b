"""The small contracts between the runtime and the reconcilers.

A reconciler gets a key and returns a requeue decision; it never sees events, queues or
leases (controller-runtime's shape). Errors: ``TransientError`` → retry with backoff,
``TerminalError`` → log and stop, anything else → retry with backoff.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from wspin.objects import Obj, ObjectKey

__all__ = ["Obj", "ObjectKey", "ObjectReader", "Reconciler", "Requeue"]


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
