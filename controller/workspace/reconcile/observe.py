"""What a pass sees, read once from the caches before anything is decided. Pure over the caches.

``snapshot`` takes ``Observed``, a frozen record of one Workspace as this pass found it: the
status and the phase it records, the pending ``spec.suspend`` request, the cached pod at the
Workspace's pod name (with the conflict that makes it someone else's, if any) and the
platform's labels on its Namespace. The phase handlers decide from it; reads beyond the caches
(the org status, a pod's Events, the live episode checks) stay explicit steps of the handlers
that need them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.types import Obj, ObjectKey
from controller.workspace.pod import ownership
from controller.workspace.pod.names import names
from controller.workspace.reconcile.deps import ReconcileDeps
from wspin.core.workspace import Workspace


@dataclass(frozen=True)
class Observed:
    ws: Obj
    view: Workspace
    """``ws`` read through the view, built once per pass."""
    key: ObjectKey
    status: Obj
    previous: str
    """The phase the status records ("" before the first status write)."""
    request: bool | None
    """``spec.suspend`` (``suspension``)."""
    pod: Obj | None
    """The cached pod at the Workspace's pod name, whoever's it is."""
    foreign: ownership.ForeignHolding | None
    """Why ``pod`` is not the Workspace's (None: it is, or there is none)."""
    labels: Mapping[str, str]
    """The platform's labels on the Workspace's Namespace."""

    def own_pod(self) -> Obj | None:
        """The Workspace's pod; someone else's reads as none (stopping: it was never ours to
        stop)."""
        return self.pod if self.foreign is None else None

    def running_pod(self) -> Obj | None:
        """The Workspace's pod; someone else's raises ``ForeignObject`` (the Workspace cannot
        run beside it)."""
        if self.foreign is not None:
            raise ownership.ForeignObject(self.foreign)
        return self.pod


def snapshot(deps: ReconcileDeps, ws: Obj) -> Observed:
    """The snapshot of ``ws`` a pass decides from."""
    key = ObjectKey.of(ws)
    view = Workspace.of(ws)
    status = ws.get("status") or {}
    pod = None
    if ws["metadata"].get("uid"):
        pod = deps.pods.get(ObjectKey(key.namespace, names(ws).pod))
    labels = deps.namespaces.of(key.namespace) if deps.namespaces is not None else {}
    return Observed(
        ws=ws,
        view=view,
        key=key,
        status=status,
        previous=view.status.phase,
        request=view.spec.suspend,
        pod=pod,
        foreign=deps.writes.conflict(pod, ws, "Pod"),
        labels=labels,
    )
