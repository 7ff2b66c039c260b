"""The workspace volume: a PVC that outlives suspend and goes with the Workspace. Pure.

Named ``workspace-<ws>``, the name the LLMSafeSpaces API and existing volumes use. Earlier
releases of wspin named it ``<ws>-workspace``: a Workspace that owns a volume of that name
keeps using it (its data stays where it is), every other Workspace gets the new name. A claim
of the former name was made before the ownership label existed, so it is the Workspace's when
it carries the Workspace's controller ownerReference and is the claim the Workspace runs on:
never one put there after the Workspace recorded the new name in ``status.pvcName``, and only
the first one seen (its uid is then recorded in ``status.pvcUID``, which only the controller
writes), never a later replacement (``claim_conflict``). The claim is never updated once
created (a size change is ignored: PVC specs are mostly immutable and a resize is the storage
administrator's decision).
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from controller.types import Obj
from controller.workspace.pod.names import PodBuildError, names, owned_metadata
from controller.workspace.pod.ownership import (
    ForeignHolding,
    conflict_of,
    reference_conflict,
    unlabelled,
)
from wspin.core.workspace import WorkspaceSpec, WorkspaceStatus

READ_WRITE_ONCE: Final = "ReadWriteOnce"
READ_WRITE_MANY: Final = "ReadWriteMany"


KIND: Final = "PersistentVolumeClaim"


def claim_conflict(
    pvc: Obj | None, ws: Obj, *, legacy_before: datetime | None = None
) -> ForeignHolding | None:
    """None when ``pvc`` is absent or the Workspace's claim, else the conflict."""
    found = conflict_of(pvc, ws, KIND, legacy_before=legacy_before)
    if found is None or pvc is None or reference_conflict(pvc, ws, KIND) is not None:
        return found
    meta, status = pvc.get("metadata") or {}, WorkspaceStatus.of(ws.get("status"))
    legacy = names(ws).legacy_pvc
    former = (
        meta.get("name") == legacy
        and status.pvc_name in ("", legacy)
        and status.pvc_uid in ("", meta.get("uid"))
    )
    return None if former and unlabelled(pvc) else found


def claim_name(ws: Obj, legacy: Obj | None, *, legacy_before: datetime | None = None) -> str:
    """The PVC the Workspace's pod mounts: ``legacy`` (the ``<ws>-workspace`` PVC in the
    cache, if any) when the Workspace owns it and it is not being deleted, else
    ``workspace-<ws>``."""
    owned = names(ws)
    if (
        legacy is not None
        and not (legacy.get("metadata") or {}).get("deletionTimestamp")
        and claim_conflict(legacy, ws, legacy_before=legacy_before) is None
    ):
        return owned.legacy_pvc
    return owned.pvc


def access_mode(storage: Obj) -> str:
    """``spec.storage.accessMode``: ReadWriteMany only when asked for exactly, else
    ReadWriteOnce (a volume one node mounts; the pod runs on one node)."""
    return READ_WRITE_MANY if storage.get("accessMode") == READ_WRITE_MANY else READ_WRITE_ONCE


def desired_pvc(ws: Obj, name: str | None = None) -> Obj:
    """The claim ``name`` (``workspace-<ws>`` by default) from ``spec.storage``."""
    storage = WorkspaceSpec.of(ws.get("spec")).storage or {}
    if not isinstance(storage, dict):
        raise PodBuildError("spec.storage must be an object with size, like {size: 10Gi}")
    size = storage.get("size")
    if not isinstance(size, str) or not size:
        raise PodBuildError("spec.storage.size is required, like '10Gi'")
    pvc_spec: Obj = {
        "accessModes": [access_mode(storage)],
        "resources": {"requests": {"storage": size}},
    }
    storage_class = storage.get("storageClassName")
    if storage_class:
        pvc_spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": owned_metadata(ws, name or names(ws).pvc),
        "spec": pvc_spec,
    }
