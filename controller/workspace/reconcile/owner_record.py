"""The owner admission verified, as the controller reads it, and the one write that asks for it.

The webhook records the verified owner on every Workspace it admits
(``wspin.core.owners``); the controller believes that record, never ``spec.owner``. A
Workspace stored by an earlier release has none. With ``--owner-record-upgrade=adopt`` the
controller asks for it once: it sets the record's annotation, and the webhook (which trusts the
controller's service account to ask, never to choose) records the spec's owner as vouched, as
the earlier release believed it. With ``hold`` nothing is asked: relay staging stays off until a
trusted writer confirms (``kubectl annotate``), and the Workspace says so in its conditions.
"""

from __future__ import annotations

from typing import Final

from controller.types import Obj
from wspin.core.owners import ANNOTATION_VERIFIED_OWNER, UpgradeMode, record_of
from wspin.core.tenancy import Labels, org_of

ADOPT_REQUEST: Final = "adopt"
"""What the controller writes to ask; the webhook replaces it with the record."""


def needs_adoption(ws: Obj, mode: UpgradeMode) -> bool:
    """True when the controller should ask the webhook for this Workspace's record: it has no
    record annotation at all (an unreadable one was asked for already, or written by hand)."""
    meta = ws.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return (
        mode == "adopt"
        and not meta.get("deletionTimestamp")
        and ANNOTATION_VERIFIED_OWNER not in annotations
    )


def record_request() -> Obj:
    """The metadata patch asking the webhook to record the Workspace's owner (the reconciler
    sends it with the finalizer, in one write)."""
    return {"annotations": {ANNOTATION_VERIFIED_OWNER: ADOPT_REQUEST}}


def org_to_check(ws: Obj, namespace_labels: Labels) -> str | None:
    """The organisation whose suspension stops this Workspace: the vouched owner's, else the
    Namespace's (``llmsafespaces.dev/org``); ``spec.owner.orgID`` as it stands decides nothing."""
    record = record_of(ws)
    if record is not None and record.vouched and record.org_id:
        return record.org_id
    return org_of(namespace_labels)
