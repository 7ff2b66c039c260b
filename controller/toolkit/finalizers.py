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


async def add_finalizer(kube: Kube, resource: Resource, obj: Obj, name: str) -> Obj:
    """``obj`` with ``name`` in its finalizers (written when missing); returns the object."""
    if has_finalizer(obj, name):
        return obj
    meta = obj["metadata"]
    patch = {
        "metadata": {
            "finalizers": [*(meta.get("finalizers") or []), name],
            "resourceVersion": meta.get("resourceVersion"),
        }
    }
    return await kube.patch(resource, meta["name"], patch, meta.get("namespace") or None)


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
