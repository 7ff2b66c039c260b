"""The status times creation and resume latencies are measured from. Pure.

- ``pendingAt``: when the Workspace was asked for, written by its first pass: the API's
  ``llmsafespaces.dev/requested-at`` annotation (RFC 3339, written when the API accepted the
  request) when it is believable, else the Workspace's creation. Dropped once the Workspace is
  Active for the first time: ``llmsafespaces_workspace_create_duration_seconds`` observes
  the time from it.
- ``resumedAt``: when a resume began (Suspended → Resuming), with ``resumeCount`` the resumes
  so far (1 on the first). Dropped once Active again:
  ``llmsafespaces_workspace_resume_duration_seconds`` observes the time from it, as
  ``first_resume`` when ``resumeCount`` is 1.

The annotation is anyone's to write who may edit the Workspace, so it is believed only when it
is no later than the creation and at most ``REQUEST_LEAD`` earlier: a forged time cannot make
a creation look slow (or fast) by more than that.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from controller.types import Obj
from wspin.core.clock import format_time, parse_time
from wspin.core.workspace import WorkspaceStatus

REQUESTED_AT: Final = "llmsafespaces.dev/requested-at"
REQUEST_LEAD: Final = 300.0
"""Seconds a request may precede the Workspace's creation (the API's own retries)."""
FIELDS: Final = ("pendingAt", "resumedAt", "resumeCount")


def requested_at(ws: Obj) -> datetime | None:
    """When ``ws`` was asked for: the annotation when believable, else its creation."""
    meta = ws.get("metadata") or {}
    created = parse_time(meta.get("creationTimestamp"))
    annotations = meta.get("annotations")
    said = parse_time(annotations.get(REQUESTED_AT)) if isinstance(annotations, dict) else None
    if said is None or created is None:
        return created
    if created - timedelta(seconds=REQUEST_LEAD) <= said <= created:
        return said
    return created


def anchor(old: Obj, new: Obj, ws: Obj, now: datetime) -> None:
    """Set or drop the anchors in ``new`` (the status a pass writes, in place) after ``old``."""
    before, after = WorkspaceStatus.of(old).phase, WorkspaceStatus.of(new).phase
    if not before and after != "Active":
        new["pendingAt"] = format_time(requested_at(ws) or now)
    if after == "Resuming" and before != "Resuming":
        count = old.get("resumeCount")
        count = count if isinstance(count, int) and not isinstance(count, bool) else 0
        new["resumedAt"], new["resumeCount"] = format_time(now), max(count, 0) + 1
        new.pop("pendingAt", None)
    if after == "Active":
        new.pop("pendingAt", None)
        new.pop("resumedAt", None)
