"""Which objects a Workspace owns: the pod, PVC, ServiceAccount and egress policy at its
names. Pure.

The names are predictable (``<ws>-<uid[:8]>``, ``workspace-<ws>``), so a
tenant with create rights in the namespace can put an object there first: a pod with the
workspace labels, an attacker's image and no delivery would otherwise be read as the
Workspace's pod and the Workspace reported Active. An owner reference proves nothing (its
creator writes it, and a tenant can read the Workspace's uid), so an object is the
Workspace's only when it carries ``llmsafespaces.dev/workspace-uid`` with that Workspace's uid,
a label the chart's ownership policies let only the controller create, add, change or remove
(``stamp`` puts it on everything the controller creates), and a controller ownerReference to
the same uid (a Workspace recreated under the same name has a new uid, so its predecessor's
leftovers are not adopted either). A foreign object is never adopted, changed or deleted: the
Workspace reports the conflict and waits.

Earlier releases did not label what they created. Their objects are older than the
controller's credentials key (``legacy_before``: the key Secret is created at the first start
of a controller that labels), so an unlabelled object with the Workspace's controller
ownerReference is the Workspace's when it was created before that moment: a tenant cannot
backdate ``creationTimestamp``, and anything the controller created since carries the label.
An upgrade therefore needs no relabelling. The claim of the former name gets one more way in
(``storage.adopted_claim``), so its data is never left behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from controller.toolkit import episodes
from controller.toolkit.conditions import condition
from controller.types import Obj
from wspin.core.clock import parse_time
from wspin.core.contract import API_GROUP, LABEL_WORKSPACE_UID
from wspin.core.errors import WspinError

CONFLICT_REASON: Final = "PodConflict"
"""Ready=False reason (and Event reason) while a foreign object blocks the workspace pod."""


@dataclass(frozen=True)
class ForeignHolding:
    """A foreign object at a name the Workspace needs."""

    kind: str
    name: str
    holder: str
    """Who the object answers to instead, in words (no values from its spec)."""

    @property
    def message(self) -> str:
        return (
            f"{self.kind} {self.name!r} already exists and is not this Workspace's "
            f"({self.holder}); it is left alone and no workspace pod runs until it is removed"
        )


class ForeignObject(WspinError):
    """Raised where the reconciler meets a ``ForeignHolding``; mapped to status in one place."""

    def __init__(self, conflict: ForeignHolding) -> None:
        super().__init__(conflict.message)
        self.conflict = conflict


def controller_reference(obj: Obj) -> Obj | None:
    """The ownerReference with ``controller: true``, if any (at most one is valid)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def owner_label(ws: Obj) -> dict[str, str]:
    """The label that marks an object as created by the controller for ``ws``."""
    return {LABEL_WORKSPACE_UID: str((ws.get("metadata") or {}).get("uid") or "")}


def stamp(body: Obj, ws: Obj) -> Obj:
    """``body`` with the owner label added, before the controller creates it."""
    meta = body.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **owner_label(ws)}
    return body


def predates(obj: Obj, legacy_before: datetime | None) -> bool:
    """True when ``obj`` was created before ``legacy_before`` (an earlier release's object)."""
    created = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    return legacy_before is not None and created is not None and created < legacy_before


def conflict_of(
    obj: Obj | None, ws: Obj, kind: str, *, legacy_before: datetime | None = None
) -> ForeignHolding | None:
    """None when ``obj`` is absent or the controller created it for ``ws`` (labelled, or
    unlabelled from before ``legacy_before``), else the conflict."""
    if obj is None:
        return None
    found = reference_conflict(obj, ws, kind)
    if found is not None or labelled_for(obj, ws):
        return found
    if unlabelled(obj) and predates(obj, legacy_before):
        return None
    return ForeignHolding(
        kind,
        str((obj.get("metadata") or {}).get("name", "")),
        f"it lacks the {LABEL_WORKSPACE_UID} label the controller puts on what it creates; "
        "its owner reference was written by whoever created it",
    )


def reference_conflict(obj: Obj, ws: Obj, kind: str) -> ForeignHolding | None:
    """The conflict when ``obj``'s controller ownerReference is not ``ws`` (None when it is)."""
    ref = controller_reference(obj)
    name = str((obj.get("metadata") or {}).get("name", ""))
    if ref is None:
        return ForeignHolding(kind, name, "it has no controller ownerReference")
    owned = (
        ref.get("kind") == "Workspace"
        and str(ref.get("apiVersion", "")).split("/")[0] == API_GROUP
        and ref.get("uid") == (ws.get("metadata") or {}).get("uid")
    )
    if not owned:
        return ForeignHolding(
            kind,
            name,
            f"its controller is {ref.get('kind')} {ref.get('name')!r} with uid {ref.get('uid')}",
        )
    return None


def labelled_for(obj: Obj, ws: Obj) -> bool:
    """True when ``obj`` carries the owner label with ``ws``'s uid."""
    uid = (ws.get("metadata") or {}).get("uid")
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return bool(uid) and labels.get(LABEL_WORKSPACE_UID) == uid


def unlabelled(obj: Obj) -> bool:
    """True when ``obj`` has no owner label at all (an earlier release's object has none)."""
    return LABEL_WORKSPACE_UID not in ((obj.get("metadata") or {}).get("labels") or {})


def check_owned(
    obj: Obj | None, ws: Obj, kind: str, *, legacy_before: datetime | None = None
) -> None:
    """Raise ``ForeignObject`` unless ``obj`` is absent or the Workspace's own."""
    found = conflict_of(obj, ws, kind, legacy_before=legacy_before)
    if found is not None:
        raise ForeignObject(found)


def conflict_condition(found: ForeignHolding, generation: int) -> Obj:
    """The Ready condition while ``found`` blocks the workspace."""
    return condition("Ready", "False", CONFLICT_REASON, found.message, generation)


def recorded(found: ForeignHolding) -> episodes.Recorded:
    """Whether conditions already report this very conflict (one Event per episode)."""
    return episodes.recorded_as(
        "Ready", status="False", reason=CONFLICT_REASON, message=found.message
    )
