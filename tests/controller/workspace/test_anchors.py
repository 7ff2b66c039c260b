"""The times creation and resume latencies are measured from: set on the pass that starts
them, dropped once Active, and a forged request time believed only within bounds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.workspace.reconcile.anchors import REQUESTED_AT, anchor, requested_at
from wspin.core.objects import Obj

NOW = datetime(2026, 11, 29, 12, 0, 30, tzinfo=UTC)


def ws(requested: str | None = None) -> Obj:
    meta: Obj = {"name": "ws1", "creationTimestamp": "2026-11-29T12:00:00Z"}
    if requested is not None:
        meta["annotations"] = {REQUESTED_AT: requested}
    return {"metadata": meta}


@pytest.mark.parametrize(
    ("requested", "believed"),
    [
        ("2026-11-29T11:59:58.123456789Z", "2026-11-29T11:59:58Z"),  # RFC 3339 nano, as sent
        ("2026-11-29T11:55:00Z", "2026-11-29T11:55:00Z"),  # the earliest believed
        ("2026-11-29T11:54:59Z", "2026-11-29T12:00:00Z"),  # too early: the creation
        ("2026-11-29T12:00:01Z", "2026-11-29T12:00:00Z"),  # after the creation: forged
        ("yesterday", "2026-11-29T12:00:00Z"),
        (None, "2026-11-29T12:00:00Z"),
    ],
)
def test_the_request_time_is_believed_only_within_five_minutes_before_creation(
    requested: str | None, believed: str
) -> None:
    found = requested_at(ws(requested))
    assert found is not None and found.strftime("%Y-%m-%dT%H:%M:%SZ") == believed


def test_the_first_pass_sets_pending_at_and_active_drops_it() -> None:
    new: Obj = {"phase": "Pending"}
    anchor({}, new, ws("2026-11-29T11:59:58Z"), NOW)
    assert new["pendingAt"] == "2026-11-29T11:59:58Z"
    later: Obj = {**new, "phase": "Creating"}
    anchor(new, later, ws(), NOW)
    assert later["pendingAt"] == "2026-11-29T11:59:58Z"  # untouched meanwhile
    active: Obj = {**later, "phase": "Active"}
    anchor(later, active, ws(), NOW)
    assert "pendingAt" not in active


def test_a_resume_is_stamped_and_counted_and_active_drops_the_stamp() -> None:
    resuming: Obj = {"phase": "Resuming", "pendingAt": "2026-11-29T11:00:00Z"}
    anchor({"phase": "Suspended", "resumeCount": 2}, resuming, ws(), NOW)
    assert resuming["resumedAt"] == "2026-11-29T12:00:30Z" and resuming["resumeCount"] == 3
    assert "pendingAt" not in resuming
    again: Obj = dict(resuming)
    anchor(resuming, again, ws(), NOW)  # still Resuming: not a second resume
    assert again["resumeCount"] == 3
    active: Obj = {**again, "phase": "Active"}
    anchor(again, active, ws(), NOW)
    assert "resumedAt" not in active and active["resumeCount"] == 3
