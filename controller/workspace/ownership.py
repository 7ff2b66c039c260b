"""Which objects a Workspace owns: the pod, PVC and ServiceAccount at its names. Pure.

The names are predictable (``<ws>-<uid[:8]>``, ``workspace-<ws>``), so a
tenant with create rights in the namespace can put an object there first: a pod with the
workspace labels, an attacker's image and no delivery would otherwise be read as the
Workspace's pod and the Workspace reported Active. An object is the Workspace's only when
its controller ownerReference names that Workspace's uid (a Workspace recreated under the
same name has a new uid, so its predecessor's leftovers are not adopted either). A foreign
object is never adopted, changed or deleted: the Workspace reports the conflict and waits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from controller.toolkit.conditions import condition
from wspin.core.contract import API_GROUP
from wspin.core.errors import WspinError

Obj = dict[str, Any]

CONFLICT_REASON: Final = "PodConflict"
"""Ready=False reason (and Event reason) while a foreign object blocks the workspace pod."""


@dataclass(frozen=True)
class Conflict:
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
    """Raised where the reconciler meets a ``Conflict``; mapped to status in one place."""

    def __init__(self, conflict: Conflict) -> None:
        super().__init__(conflict.message)
        self.conflict = conflict


def controller_reference(obj: Obj) -> Obj | None:
    """The ownerReference with ``controller: true``, if any (at most one is valid)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def conflict_of(obj: Obj | None, ws: Obj, kind: str) -> Conflict | None:
    """None when ``obj`` is absent or controlled by ``ws`` (by uid), else the conflict."""
    if obj is None:
        return None
    meta = ws.get("metadata") or {}
    ref = controller_reference(obj)
    name = str((obj.get("metadata") or {}).get("name", ""))
    if ref is None:
        return Conflict(kind, name, "it has no controller ownerReference")
    owned = (
        ref.get("kind") == "Workspace"
        and str(ref.get("apiVersion", "")).split("/")[0] == API_GROUP
        and ref.get("uid") == meta.get("uid")
    )
    if owned:
        return None
    return Conflict(
        kind,
        name,
        f"its controller is {ref.get('kind')} {ref.get('name')!r} with uid {ref.get('uid')}",
    )


def check_owned(obj: Obj | None, ws: Obj, kind: str) -> None:
    """Raise ``ForeignObject`` unless ``obj`` is absent or the Workspace's own."""
    found = conflict_of(obj, ws, kind)
    if found is not None:
        raise ForeignObject(found)


def conflict_condition(found: Conflict, generation: int) -> Obj:
    """The Ready condition while ``found`` blocks the workspace."""
    return condition("Ready", "False", CONFLICT_REASON, found.message, generation)


def new_episode(conditions: list[Obj], found: Conflict) -> bool:
    """True unless the status already reports this very conflict (one Event per episode)."""
    for existing in conditions:
        if existing.get("type") == "Ready":
            return not (
                existing.get("status") == "False"
                and existing.get("reason") == CONFLICT_REASON
                and existing.get("message") == found.message
            )
    return True
