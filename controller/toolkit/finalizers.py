"""Finalizers: added before the first side effect, removed after the last cleanup.

Both writes carry the object's resourceVersion, so a finalizer list another writer changed
meanwhile is never overwritten: the patch fails with a conflict and the reconcile is
retried against the newer object.
"""

from __future__ import annotations

from controller.types import Obj
from wspin.core.errors import NotFound
from wspin.core.kinds import Resource
from wspin.kube.client import Kube


def has_finalizer(obj: Obj, name: str) -> bool:
    return name in ((obj.get("metadata") or {}).get("finalizers") or [])


def version_of(obj: Obj) -> Obj:
    """A metadata patch that only holds ``obj``'s resourceVersion (a conditional write)."""
    return {"resourceVersion": obj["metadata"].get("resourceVersion")}


def finalizer_patch(obj: Obj, name: str) -> Obj | None:
    """The metadata patch adding ``name`` to ``obj``'s finalizers, None when it is there."""
    if has_finalizer(obj, name):
        return None
    meta = obj["metadata"]
    return {"finalizers": [*(meta.get("finalizers") or []), name], **version_of(obj)}


async def patch_metadata(kube: Kube, resource: Resource, obj: Obj, patch: Obj) -> Obj:
    """Write the metadata ``patch`` (carrying ``obj``'s resourceVersion) on ``obj``."""
    meta = obj["metadata"]
    return await kube.patch(
        resource, meta["name"], {"metadata": patch}, meta.get("namespace") or None
    )


async def add_finalizer(kube: Kube, resource: Resource, obj: Obj, name: str) -> Obj:
    """``obj`` with ``name`` in its finalizers (written when missing); returns the object."""
    patch = finalizer_patch(obj, name)
    if patch is None:
        return obj
    return await patch_metadata(kube, resource, obj, patch)


async def remove_finalizer(kube: Kube, resource: Resource, obj: Obj, name: str) -> bool:
    """Drop ``name`` from ``obj``'s finalizers; False when it was not there or the object is
    already gone."""
    if not has_finalizer(obj, name):
        return False
    meta = obj["metadata"]
    patch = {
        "metadata": {
            "finalizers": [f for f in meta.get("finalizers") or [] if f != name],
            "resourceVersion": meta.get("resourceVersion"),
        }
    }
    try:
        await kube.patch(resource, meta["name"], patch, meta.get("namespace") or None)
    except NotFound:
        return False
    return True
