"""Workspaces as the webhook's owner record leaves them, for tests that create Workspaces
straight through the API (without the webhook in front)."""

from __future__ import annotations

from wspin.core.objects import Obj
from wspin.core.owners import ANNOTATION_VERIFIED_OWNER, OwnerRecord


def recorded(body: Obj, *, vouched: bool = True) -> Obj:
    """``body`` with the owner record the webhook writes for its ``spec.owner`` (a trusted
    writer's: vouched)."""
    owner = (body.get("spec") or {}).get("owner") or {}
    record = OwnerRecord(str(owner.get("userID") or ""), str(owner.get("orgID") or ""), vouched)
    meta = body.setdefault("metadata", {})
    meta.setdefault("annotations", {})[ANNOTATION_VERIFIED_OWNER] = record.encode()
    return body
