"""ConfigMap and Secret data upserts: create the object, or replace its data when it differs.

Used for objects the controller owns outright (the router's peers list, the relay VM
tokens). An unchanged body is never written, so the object's resourceVersion, and the
kubelet's refresh of a volume that mounts it, stays quiet between real changes. A create
that races another writer re-reads and replaces; a replace that races fails with a
conflict and the reconcile is retried.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

from controller.types import Obj
from wspin.core.errors import AlreadyExists
from wspin.core.kinds import CONFIGMAPS, SECRETS, Resource
from wspin.kube.client import Kube


def encode_secret_data(values: Mapping[str, str]) -> dict[str, str]:
    return {key: base64.b64encode(value.encode()).decode() for key, value in values.items()}


def decode_secret_data(secret: Obj | None) -> dict[str, str]:
    """``data`` decoded to text; keys with empty or undecodable values are left out."""
    decoded: dict[str, str] = {}
    for key, encoded in ((secret or {}).get("data") or {}).items():
        try:
            value = base64.b64decode(encoded or "", validate=True).decode()
        except (ValueError, UnicodeDecodeError):
            continue
        if value:
            decoded[key] = value
    return decoded


async def upsert_configmap(
    kube: Kube,
    namespace: str,
    name: str,
    data: Mapping[str, str],
    *,
    labels: Mapping[str, str] | None = None,
) -> bool:
    """Make ConfigMap ``name`` hold exactly ``data``; False when it already did."""
    return await _upsert(kube, CONFIGMAPS, namespace, name, dict(data), labels, {})


async def upsert_secret(
    kube: Kube,
    namespace: str,
    name: str,
    values: Mapping[str, str],
    *,
    labels: Mapping[str, str] | None = None,
) -> bool:
    """Make Secret ``name`` (type Opaque) hold exactly ``values``; False when it already did."""
    return await _upsert(
        kube, SECRETS, namespace, name, encode_secret_data(values), labels, {"type": "Opaque"}
    )


async def _upsert(
    kube: Kube,
    resource: Resource,
    namespace: str,
    name: str,
    data: dict[str, str],
    labels: Mapping[str, str] | None,
    extra: Obj,
) -> bool:
    current = await kube.get_or_none(resource, name, namespace)
    if current is None:
        metadata: Obj = {"name": name, "namespace": namespace}
        if labels:
            metadata["labels"] = dict(labels)
        try:
            await kube.create(resource, {"metadata": metadata, **extra, "data": data}, namespace)
            return True
        except AlreadyExists:
            current = await kube.get(resource, name, namespace)
    meta = current.setdefault("metadata", {})
    wanted_labels = {**(meta.get("labels") or {}), **(labels or {})}
    # An owner reference would let garbage collection delete the object with its owner;
    # these objects outlive any one owner (the router must see the emptied list).
    if (
        (current.get("data") or {}) == data
        and not current.get("stringData")
        and not meta.get("ownerReferences")
        and (meta.get("labels") or {}) == wanted_labels
    ):
        return False
    current["data"] = data
    current.pop("stringData", None)
    meta.pop("ownerReferences", None)
    if wanted_labels:
        meta["labels"] = wanted_labels
    await kube.replace(resource, current)
    return True
