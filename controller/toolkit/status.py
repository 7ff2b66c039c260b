"""Status writes as merge patches: only what changed, never a whole-object replace.

A merge patch of the changed keys cannot undo another writer's keys (relay staging keeps its
bookkeeping on the Workspace status; the router's health lands in the fleet's), and needs no
resourceVersion, so it never fails on a status another pass wrote a moment ago.
"""

from __future__ import annotations

from controller.types import Obj
from wspin.core.errors import NotFound
from wspin.core.kinds import Resource
from wspin.core.redact import strip_url_credentials
from wspin.kube.client import Kube


def status_patch(old: Obj, new: Obj) -> Obj | None:
    """A merge patch turning status ``old`` into ``new``, or None when nothing changed.

    Keys in ``old`` missing from ``new`` become null (merge-patch deletion); a changed
    value is sent whole (lists and nested objects are replaced, as merge patch does).
    """
    if old == new:
        return None
    patch: Obj = {key: value for key, value in new.items() if old.get(key) != value}
    for key in old:
        if key not in new:
            patch[key] = None
    return patch


async def write_status(kube: Kube, resource: Resource, obj: Obj, new: Obj) -> Obj | None:
    """Patch ``obj``'s ``/status`` from its current status to ``new``.

    Returns the written object, or None when nothing changed or the object is gone (a
    deleted object has no status left to describe)."""
    if isinstance(new.get("message"), str):  # a reason's words may quote a user's URL
        new = {**new, "message": strip_url_credentials(new["message"])}
    patch = status_patch(dict(obj.get("status") or {}), new)
    if patch is None:
        return None
    meta = obj["metadata"]
    try:
        return await kube.patch(
            resource, meta["name"], {"status": patch}, meta.get("namespace") or None, sub="status"
        )
    except NotFound:
        return None
