"""One Workspace per relay identity: a tenant never stages onto another tenant's key.

The relay identity of a Workspace is its bare name: the router keys envelopes by the
``workspace-id`` label, signs it into every token and checks it against the request path
``/w/<name>/<slug>/v1``, and the API addresses the credential endpoint by it. Workspace names
are unique only per namespace, so ``team-a/ws1`` and ``team-b/ws1`` map onto one identity.
Without an owner the second would overwrite the first's envelopes (and run the first
tenant's traffic on its own key, or the other way round), revoke them and clean them up.

The owner of an identity is the oldest live Workspace with that name: smallest
``creationTimestamp`` (set by the API server, never by a tenant), so every replica and every
restart gets the same answer without a stored claim, and the Workspace that was there first
keeps its key. The timestamp has second precision; within one second the Workspace already
staged under its own uid wins, then the smallest uid. The Workspace
cache delivers events in the API server's order, so a Workspace created later can never be
decided on before the earlier one's staging mark (``status.relayStaging.stagedFor``, which
only the controller writes) is in the index. Every other Workspace with
that name is not staged at all (``NameConflict`` naming the owner's namespace, never its keys);
when the owner is deleted, its cleanup runs and the next oldest takes over on its next pass.

``WorkspaceNames`` is the index the decision reads: name → the Workspaces holding it, kept
current by the Workspace informer's events (an O(1) lookup per pass instead of a scan of
every Workspace in the cluster). Everything else here is pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from controller.types import Obj
from wspin.core.contract import LABEL_WORKSPACE_UID as LABEL_WORKSPACE_UID
from wspin.core.workspace import RELAY_STAGING, WorkspaceStatus

LABEL_WORKSPACE_NAMESPACE: Final = "llmsafespaces.dev/workspace-namespace"
"""Recorded, with ``LABEL_WORKSPACE_UID``, on every object staged for a Workspace (envelopes
and the handoff), so the owner of each is visible to an operator and to the router without
reading any annotation; the uid label is the controller's alone (the chart's ownership
policies), so a handoff that carries it was written by the controller."""
STAGED_FOR_ANNOTATION: Final = "llmsafespaces.dev/relay-staged-for"
"""Where releases before this one marked whose bookkeeping a Workspace's annotations were."""
STAGED_STATUS_FIELD: Final = RELAY_STAGING
"""The Workspace status field holding the bookkeeping (``desired``), ``stagedFor`` included."""


@dataclass(frozen=True, order=True)
class Claimant:
    """A Workspace holding a name; ordered oldest first (the owner sorts lowest)."""

    created: str
    unstaged: bool
    """False when the Workspace's bookkeeping is its own (it staged under its uid)."""
    uid: str
    namespace: str
    name: str

    @classmethod
    def of(cls, ws: Obj) -> Claimant:
        meta = ws.get("metadata") or {}
        record = WorkspaceStatus.of(ws.get("status")).relay_staging
        mark = record.get("stagedFor") if isinstance(record, dict) else None
        return cls(
            created=str(meta.get("creationTimestamp") or ""),
            unstaged=mark != staged_for(ws),
            uid=str(meta.get("uid") or ""),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
        )

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.name}"


def owner_labels(ws: Obj) -> dict[str, str]:
    """The owner's namespace and uid as labels (both are valid label values: a namespace is a
    DNS label, a uid 36 characters of hex and dashes)."""
    claimant = Claimant.of(ws)
    return {LABEL_WORKSPACE_NAMESPACE: claimant.namespace, LABEL_WORKSPACE_UID: claimant.uid}


def staged_for(ws: Obj) -> str:
    """``<namespace>/<uid>``: the bookkeeping value saying whose annotations these are."""
    meta = ws.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('uid') or ''}"


def owner_of(claimants: list[Claimant]) -> Claimant | None:
    """The oldest claimant, or None for none."""
    return min(claimants, default=None)


class WorkspaceNames:
    """Name → the Workspaces holding it, fed by ``observe`` from the Workspace informer."""

    def __init__(self) -> None:
        self._by_name: dict[str, dict[str, Claimant]] = {}

    def observe(
        self, kind: Literal["ADDED", "MODIFIED", "DELETED"], obj: Obj, old: Obj | None
    ) -> None:
        """An informer event handler: a deleted Workspace leaves the index only once it is
        gone from the API, so an owner still cleaning up keeps its name until it is done."""
        claimant = Claimant.of(obj)
        holders = self._by_name.setdefault(claimant.name, {})
        if kind == "DELETED":
            holders.pop(claimant.uid, None)
            if not holders:
                del self._by_name[claimant.name]
        else:
            holders[claimant.uid] = claimant

    def named(self, name: str) -> list[Claimant]:
        return list(self._by_name.get(name, {}).values())

    def conflict(self, ws: Obj) -> Claimant | None:
        """The other Workspace that owns ``ws``'s identity, or None when ``ws`` owns it.

        ``ws`` itself always counts, so a Workspace the index has not seen yet (the cache
        lags behind the reconcile) is still compared with every holder the index knows."""
        me = Claimant.of(ws)
        holders = {c.uid: c for c in self.named(me.name)}
        holders[me.uid] = me
        owner = owner_of(list(holders.values()))
        return None if owner is None or owner.uid == me.uid else owner
