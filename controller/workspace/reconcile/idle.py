"""The deadlines a Workspace runs on by itself: idle suspend, the pod's lifetime and the time a
suspended Workspace is kept. Pure: the reconciler asks at each pass and comes back at the
earliest deadline (never on a fixed period).

- **Idle** (``spec.autoSuspend``: ``enabled``, default true; ``idleTimeoutSeconds``, default
  86400, anything below 1 meaning the default): an Active Workspace whose last activity is
  older than the timeout is suspended. Last activity is the annotation
  ``llmsafespaces.dev/last-activity-at`` (RFC 3339, written by the API as it proxies), else the
  deprecated ``status.lastActivityAt``. A Workspace with no activity recorded at all is never
  idle-suspended. Activity is counted from the pod's start at the earliest (a resumed
  Workspace is not idle the moment it runs), and a time in the future counts as now (a
  hand-written annotation cannot buy a Workspace out of the policy).
- **Lifetime** (``spec.timeout`` seconds, 0 = none): an Active pod older than that since it
  became Active (``status.startTime``) is suspended; every new pod starts the clock again.
- **Kept while suspended** (``spec.ttlSecondsAfterSuspended``, 0 = forever): a Workspace
  Suspended that long ends: its volume is deleted and it is kept as Terminated, or it is
  deleted, as a Job is after ``ttlSecondsAfterFinished`` (``--workspace-ttl-action``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from controller.types import Obj
from wspin.core.clock import parse_time
from wspin.core.workspace import Workspace

LAST_ACTIVITY: Final = "llmsafespaces.dev/last-activity-at"
DEFAULT_IDLE_TIMEOUT: Final = 86400
IDLE: Final = "IdleTimeout"
"""Reason (status and Event) of an idle suspend."""
LIFETIME: Final = "LifetimeExceeded"
"""Reason of a suspend after ``spec.timeout``."""
TTL_EXPIRED: Final = "TTLExpired"
"""Reason of the end after ``spec.ttlSecondsAfterSuspended``."""


@dataclass(frozen=True)
class AutoSuspend:
    """Suspend now, for ``reason`` (``IDLE`` or ``LIFETIME``)."""

    reason: str
    message: str
    metric: str
    """The ``auto_suspensions_total`` reason label (``idle`` or ``timeout``)."""


def idle_timeout(ws: Obj) -> int | None:
    """Seconds without activity after which the Workspace is suspended (None: never)."""
    spec = Workspace.of(ws).spec
    if not spec.auto_suspend_enabled:
        return None
    seconds = spec.idle_timeout_seconds
    return seconds if seconds is not None and seconds > 0 else DEFAULT_IDLE_TIMEOUT


def last_activity(ws: Obj) -> datetime | None:
    """The annotation, else the deprecated status field (None: no activity recorded)."""
    view = Workspace.of(ws)
    found = parse_time(view.annotations.get(LAST_ACTIVITY))
    if found is None:
        found = view.status.last_activity_at
    return found


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def active_deadline(ws: Obj, now: datetime) -> AutoSuspend | float | None:
    """For an Active Workspace: suspend now, or seconds until the earliest deadline, or None."""
    view = Workspace.of(ws)
    started = view.status.start_time or now
    due: list[float] = []
    lifetime = view.spec.timeout
    if lifetime is not None and lifetime > 0:
        left = lifetime - (now - started).total_seconds()
        if left <= 0:
            return AutoSuspend(
                LIFETIME,
                f"the pod ran for its spec.timeout of {_duration(lifetime)}",
                "timeout",
            )
        due.append(left)
    timeout = idle_timeout(ws)
    activity = last_activity(ws)
    if timeout is not None and activity is not None:
        active_at = min(max(activity, started), now)
        left = timeout - (now - active_at).total_seconds()
        if left <= 0:
            return AutoSuspend(
                IDLE,
                f"no activity for {_duration(timeout)} (spec.autoSuspend.idleTimeoutSeconds)",
                "idle",
            )
        due.append(left)
    return min(due) if due else None


def ttl_left(ws: Obj, now: datetime) -> float | None:
    """For a Suspended Workspace: seconds until it is deleted (<= 0: now), None: kept."""
    view = Workspace.of(ws)
    ttl = view.spec.ttl_seconds_after_suspended
    suspended = view.status.suspended_at
    if ttl is None or ttl <= 0 or suspended is None:
        return None
    return ttl - (now - suspended).total_seconds()
