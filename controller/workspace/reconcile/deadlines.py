"""When a Workspace is looked at again without an event: the requeue policy, in one place.

A Workspace is reconciled when it or something it owns (pod, PVC) changes; the watches
deliver every such change, so no phase is polled. The only other wake-ups are deadlines a
reconcile found, each for something no watch can report:

- the verify-failure recheck: a pod failing its binary check crash-loops on its own; the
  Workspace is looked at again after ``VERIFY_FAILURE_RECHECK`` to refresh what it reports,
  not sooner (a faster requeue would only spin);
- relay staging's own deadline (``StagingReport.requeue_after``): token renewal at half the
  TTL with jitter, the credential-source cache expiry, the revocation staleness bound;
- recovery's (``healing``): a replaced pod's retry falling due (``status.nextRetryAt``), a
  stuck pod's threshold, the moment a pod's Events are worth reading, and the end of the
  stability window that clears a failure record;
- later ones (an org-status cache) join through the same function.

A steady state with nothing due therefore makes no request at all. Pure.
"""

from __future__ import annotations

from typing import Final

from controller.types import Requeue

VERIFY_FAILURE_RECHECK: Final = 300.0
"""Seconds before a Workspace whose pod failed verification is looked at again."""

MIN_REQUEUE: Final = 0.05
"""Seconds; a deadline already due (or a clock step backwards) still waits this long, so a
misbehaving deadline source cannot turn into a hot loop of reconciles."""


def next_requeue(*deadlines: float | None) -> Requeue | None:
    """The earliest of the deadlines that are set (seconds from now), or None: wait for an
    event."""
    due = [deadline for deadline in deadlines if deadline is not None]
    if not due:
        return None
    return Requeue(max(min(due), MIN_REQUEUE))
