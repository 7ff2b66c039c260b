"""Session drain: a recycle the controller starts waits for the agent's busy sessions to end.

Which recycles drain: a new ``spec.restartGeneration``, an ``spec.architecture`` the pod does
not run on, and credentials the controller can no longer vouch for, each of a pod that serves
(Active, on its IP). Suspends never drain (the termination grace bounds them); neither do
health restarts, losses, nor a pod that never served.

The verdict (``decide``, pure) from what agentd's deep status says, read after the drain began:

1. the read failed, or agentd says it is unhealthy → go ahead (*failed open*: counted, an Event
   each time): a drain must never wedge a recycle on an agent that cannot answer;
2. no busy session → go ahead;
3. otherwise hold the pod, and count progress: any change of the busy sessions or of their
   context use since the last look restarts the stall clock;
4. no progress for the stall bound (``--session-drain-stall-bound``, 1 h) → go ahead
   (*forced*: counted, a Warning Event);
5. draining for ``LIMIT_FACTOR`` stall bounds, progress or not → go ahead (*forced* too): the
   sessions are reported by the pod, which runs the tenant's code, and a report that keeps
   changing must not hold a recycle the platform starts (new pins) forever.

The first hold of a drain is announced once (``SessionDrainDeferred``, counted once). Windows
are kept in memory (``DrainWindows``), keyed by the Workspace's namespace and uid and pinned to
the pod IP: a new pod IP is a new drain; a controller restart starts the drain afresh.

The force-recycle annotation (``llmsafespaces.dev/force-recycle``) is the user's consent to
skip the drain for one bump: it acts only when its value is exactly the ``restartGeneration``
being consumed, in decimal. It is removed first (a JSON patch that tests the value, so a marker
written meanwhile is never removed unseen); only then is the pod replaced. A marker that
cannot be removed keeps both the pod and the marker, and the pass is retried. A marker naming a
generation the status already observed is removed as spent.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final, Literal

from controller.types import Obj
from controller.workspace.agent.view import AgentView
from controller.workspace.pod.recycle import RecycleReason, recycle_reason, restart_generation_of
from wspin.core.errors import Invalid, NotFound
from wspin.core.kinds import WORKSPACES
from wspin.kube.client import Kube

FORCE_RECYCLE: Final = "llmsafespaces.dev/force-recycle"
LIMIT_FACTOR: Final = 4
"""The longest a drain may take, in stall bounds (4 h by default)."""
FIRST_READ_WAIT: Final = 15.0
"""Seconds a drain waits for its first deep status read before looking again on its own (the
read's answer queues the Workspace sooner)."""

DEFERRED: Final = "SessionDrainDeferred"
FORCED: Final = "SessionDrainForced"
FAILED_OPEN: Final = "SessionDrainFailedOpen"
USER_FORCED: Final = "SessionDrainUserForced"


@dataclass(frozen=True)
class Window:
    """One drain in progress."""

    pod_ip: str
    started: datetime
    epoch: int
    """The scheduler's drain epoch: deep status reads from it on are fresh."""
    progress_at: datetime
    busy_changes: int
    announced: bool = False


@dataclass(frozen=True)
class Proceed:
    """Replace the pod now."""

    outcome: Literal["idle", "failed_open", "forced"]
    detail: str = ""


@dataclass(frozen=True)
class Hold:
    """Keep the pod; look again within ``after`` seconds (an answer may come sooner)."""

    after: float
    busy: int = 0
    announce: bool = False
    """The first hold of this drain: say so once."""


def reason_of(pod: Obj, ws: Obj, untrusted: bool) -> RecycleReason:
    """Why the pod is being recycled, as the drain metrics label it (``recycle``: the same
    reason that made it stale)."""
    return recycle_reason(pod, ws, untrusted=untrusted)


def decide(
    window: Window, view: AgentView, now: datetime, stall_bound: float
) -> tuple[Proceed | Hold, Window]:
    """The verdict on a drain, and its window afterwards. Pure."""
    if view.status_epoch < window.epoch or (view.status is None and not view.status_problem):
        return Hold(FIRST_READ_WAIT), window  # no read since the drain began
    if view.status_problem:
        return Proceed("failed_open", view.status_problem), window
    assert view.status is not None
    busy = view.status.busy()
    if not busy:
        return Proceed("idle"), window
    if view.busy_changes != window.busy_changes:
        window = replace(window, progress_at=now, busy_changes=view.busy_changes)
    stalled = (now - window.progress_at).total_seconds()
    if stalled >= stall_bound:
        return Proceed("forced", f"no progress for {stalled:.0f} s"), window
    draining = (now - window.started).total_seconds()
    limit = LIMIT_FACTOR * stall_bound
    if draining >= limit:
        return Proceed(
            "forced", f"draining for {draining:.0f} s, the longest a drain may take"
        ), window
    after = min(stall_bound - stalled, limit - draining)
    hold = Hold(after, len(busy), announce=not window.announced)
    return hold, replace(window, announced=True)


class DrainWindows:
    """The drains in progress, keyed by (namespace, Workspace uid), pinned to the pod IP."""

    def __init__(self) -> None:
        self._windows: dict[tuple[str, str], Window] = {}

    def get(self, ws: Obj, pod_ip: str) -> Window | None:
        key = _key(ws)
        window = self._windows.get(key)
        if window is not None and window.pod_ip != pod_ip:
            del self._windows[key]  # another pod: its drain starts afresh
            return None
        return window

    def put(self, ws: Obj, window: Window, *, stall_bound: float) -> None:
        self._windows[_key(ws)] = window
        # A window whose Workspace went away is forgotten once it could no longer matter.
        for key, other in list(self._windows.items()):
            if (window.started - other.started).total_seconds() > 2 * stall_bound:
                del self._windows[key]

    def close(self, ws: Obj) -> Window | None:
        return self._windows.pop(_key(ws), None)

    def __len__(self) -> int:
        return len(self._windows)


def _key(ws: Obj) -> tuple[str, str]:
    meta = ws.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("uid") or ""))


def force_marker(ws: Obj) -> str | None:
    annotations = (ws.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(FORCE_RECYCLE)
    return value if isinstance(value, str) else None


def user_forced(ws: Obj) -> bool:
    """The marker consents to skipping the drain of the bump being consumed now."""
    return force_marker(ws) == restart_generation_of(ws)


def spent_marker(ws: Obj, observed: int | None) -> str | None:
    """The marker's value when it names a generation already observed (it can never act
    again), else None."""
    value = force_marker(ws)
    if value is None or observed is None or not value.isdigit():
        return None
    return value if int(value) <= observed else None


async def clear_marker(kube: Kube, ws: Obj, value: str) -> str | None:
    """Remove the marker if it still holds ``value``; the written version, or None when it
    changed meanwhile or the Workspace is gone. Other failures raise."""
    meta = ws["metadata"]
    path = "/metadata/annotations/" + FORCE_RECYCLE.replace("~", "~0").replace("/", "~1")
    ops = [{"op": "test", "path": path, "value": value}, {"op": "remove", "path": path}]
    try:
        updated = await kube.patch(
            WORKSPACES, meta["name"], ops, meta.get("namespace"), patch_type="json"
        )
    except (Invalid, NotFound):
        return None
    return str(updated["metadata"].get("resourceVersion", ""))
