"""The recovery policy and the status that records it. Pure.

Every failure of a Workspace's pod (``failures``: a container exit, the pod ended, evicted,
lost or stuck past its threshold) is counted in ``status.consecutiveFailures`` and
``status.recoveryAttempts``, with ``lastFailureClass`` and ``lastFailureAt``. The next try is
due at ``status.nextRetryAt``, ``base * 2^(n-1)`` seconds after the n-th consecutive failure,
capped, by class:

| class | base | cap | RecoveryExhausted at |
|---|---|---|---|
| Infrastructure | 5 s | 2 min | 10 failures |
| Resource | 10 s | 5 min | 6 |
| Process | 10 s | 5 min | 6 |
| Configuration | 30 s | 5 min | 3 |

A pod the controller replaced is created again no earlier than ``nextRetryAt`` (a deadline
the reconcile returns; nothing polls). A container that exits is restarted in place by the
kubelet on its own back-off (10 s doubling to 5 min: the Process and Resource schedule), so
its pod is kept (``kubectl logs --previous`` still works) and ``nextRetryAt`` says when that
restart is due at the earliest.

Crossing a class's threshold sets ``RecoveryExhausted=True`` once (one Event, one metric
increment); retries go on at the capped backoff, and ``spec.suspend: true`` is what stops them.
The record starts over when the Workspace's spec changes (a ``restartGeneration`` bump
included; ``recoverySpec`` holds a digest of the spec it was counted under) and when it is
suspended. ``spec.suspend`` is not part of that digest: it is a request the API writes and the
controller removes, never a new spec, so neither writing nor consuming one (a resume sent
while running, say) loses a failure count or a ``RecoveryExhausted`` episode; it clears once the
Workspace has been Active for ``STABILITY_WINDOW`` in one stretch (``lastStableAt`` marks the
start of that stretch; a new failure or leaving Active ends it), which also zeroes
``controllerRestartCount``, the health restarts' counter.

``lastFailedPod`` remembers which pod the last failures were counted on, how many of its
containers' exits are counted and whether its failure as a whole is, so a failure is counted
once however many passes see it (a cache that still shows a deleted pod, a container's restart
count that keeps its old exits).
``recoveryAttempts`` is never reset: the failures a Workspace has recovered from in its life.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Final

from controller.toolkit.conditions import condition, remove_conditions
from controller.types import Obj
from controller.workspace.recovery import failures as fl
from wspin.core.backoff import Backoff
from wspin.core.clock import format_time, parse_time
from wspin.core.workspace import CONTROLLER_RESTART_COUNT, WorkspaceSpec

RECOVERY_EXHAUSTED: Final = "RecoveryExhausted"
STABILITY_WINDOW: Final = 120.0
"""Seconds a Workspace must stay Active before its failure record is cleared."""
STOPPED: Final = ("Suspending", "Suspended", "Terminating", "Terminated")
"""Phases that end a recovery episode: nothing is retried while the Workspace is stopped."""
FIELDS: Final = (
    "consecutiveFailures",
    "lastFailureClass",
    "lastFailureAt",
    "nextRetryAt",
    "lastStableAt",
    "recoveryAttempts",
    "lastFailedPod",
)
RESTARTS_FIELD: Final = CONTROLLER_RESTART_COUNT
SPEC_FIELD: Final = "recoverySpec"
"""The digest of the spec the record was counted under (``spec_digest``)."""


def spec_digest(spec: object) -> str:
    """What a spec change means to the record: 16 hex of the sha256 of ``spec`` without
    ``suspend``, in canonical JSON."""
    kept = WorkspaceSpec.of(spec).without_suspend()
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Policy:
    """How one failure class is retried."""

    schedule: Backoff
    exhausted_after: int

    @property
    def cap(self) -> float:
        """Seconds between retries once the schedule has reached its ceiling."""
        return self.schedule.cap

    def backoff(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th consecutive failure (0 for none)."""
        return self.schedule.delay(failures)


POLICIES: Final[dict[str, Policy]] = {
    fl.INFRASTRUCTURE: Policy(Backoff(5.0, 120.0), 10),
    fl.RESOURCE: Policy(Backoff(10.0, 300.0), 6),
    fl.PROCESS: Policy(Backoff(10.0, 300.0), 6),
    fl.CONFIGURATION: Policy(Backoff(30.0, 300.0), 3),
}


def policy(failure_class: str) -> Policy:
    """The class's policy (an unknown class, from a hand-edited status, is a Process one)."""
    return POLICIES.get(failure_class, POLICIES[fl.PROCESS])


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


@dataclass(frozen=True)
class RecoveryState:
    """The recovery fields of one Workspace's status."""

    failures: int = 0
    failure_class: str = ""
    last_failure_at: datetime | None = None
    next_retry_at: datetime | None = None
    last_stable_at: datetime | None = None
    attempts: int = 0
    pod: str = ""
    """The uid of the pod ``pod_exits`` and ``pod_failed`` are about."""
    pod_exits: int = 0
    """Its containers' exits counted."""
    pod_failed: bool = False
    """Its failure as a whole (ended, disrupted, stuck) counted."""
    restarts_cleared: bool = False
    """This pass ends the episode: ``controllerRestartCount`` goes back to 0."""
    spec: str = ""
    """The digest of the spec the pass saw ("" unknown: its generation decides)."""

    @classmethod
    def of(cls, status: Obj, generation: int, spec: str = "") -> RecoveryState:
        """The state ``status`` records; another spec than the one it was counted under (a
        record without that digest: a generation newer than the status observed) starts
        over."""
        counted = status.get("lastFailedPod")
        counted = counted if isinstance(counted, dict) else {}
        state = cls(
            failures=_int(status.get("consecutiveFailures")),
            failure_class=str(status.get("lastFailureClass") or ""),
            last_failure_at=parse_time(status.get("lastFailureAt")),
            next_retry_at=parse_time(status.get("nextRetryAt")),
            last_stable_at=parse_time(status.get("lastStableAt")),
            attempts=_int(status.get("recoveryAttempts")),
            pod=str(counted.get("uid") or ""),
            pod_exits=_int(counted.get("containerExits")),
            pod_failed=counted.get("podFailed") is True,
            spec=spec,
        )
        recorded = status.get(SPEC_FIELD)
        if spec and isinstance(recorded, str) and recorded:
            renewed = recorded != spec
        else:
            observed = status.get("observedGeneration")
            renewed = isinstance(observed, int) and observed != generation
        if renewed and (state.failures or _int(status.get(RESTARTS_FIELD))):
            return state.cleared()
        return state

    def cleared(self) -> RecoveryState:
        """A new start: no failures, nothing pending; what was counted stays counted."""
        return RecoveryState(
            attempts=self.attempts,
            pod=self.pod,
            pod_exits=self.pod_exits,
            pod_failed=self.pod_failed,
            restarts_cleared=True,
            spec=self.spec,
        )

    def exits(self, pod_uid: str) -> int:
        """Exits of pod ``pod_uid``'s containers already counted."""
        return self.pod_exits if pod_uid and pod_uid == self.pod else 0

    def failed(self, pod_uid: str) -> bool:
        """Whether pod ``pod_uid``'s failure as a whole is counted."""
        return bool(pod_uid) and pod_uid == self.pod and self.pod_failed

    def seen(self, pod_uid: str, exits: int, failed: bool) -> RecoveryState:
        """Pod ``pod_uid`` with ``exits`` exits and its failure as a whole (``failed``) counted."""
        if not pod_uid:
            return self
        return replace(self, pod=pod_uid, pod_exits=exits, pod_failed=failed)

    def record(self, failure: fl.Failure, count: int, now: datetime) -> RecoveryState:
        """``count`` more failures of ``failure``'s class at ``now``."""
        failures = self.failures + count
        wait = policy(failure.failure_class).backoff(failures)
        return replace(
            self,
            failures=failures,
            failure_class=failure.failure_class,
            last_failure_at=now,
            next_retry_at=now + timedelta(seconds=wait),
            last_stable_at=None,
            attempts=self.attempts + count,
        )

    def backoff(self) -> float:
        """Seconds between the last failure and the retry it scheduled."""
        return policy(self.failure_class).backoff(self.failures)

    def retry_wait(self, now: datetime) -> float | None:
        """Seconds until the pending retry is due, or None when it is due (or none is)."""
        if self.next_retry_at is None or self.next_retry_at <= now:
            return None
        return (self.next_retry_at - now).total_seconds()

    def crossed(self, before: int) -> bool:
        """Whether going from ``before`` failures to this state's crossed its threshold."""
        threshold = policy(self.failure_class).exhausted_after
        return before < threshold <= self.failures

    def fields(self) -> dict[str, object | None]:
        """The status fields (None: absent)."""
        return {
            "consecutiveFailures": self.failures or None,
            "lastFailureClass": self.failure_class or None,
            "lastFailureAt": _time(self.last_failure_at),
            "nextRetryAt": _time(self.next_retry_at),
            "lastStableAt": _time(self.last_stable_at),
            "recoveryAttempts": self.attempts or None,
            "lastFailedPod": (
                {"uid": self.pod, "containerExits": self.pod_exits, "podFailed": self.pod_failed}
                if self.pod
                else None
            ),
        }


def _time(moment: datetime | None) -> str | None:
    return format_time(moment) if moment is not None else None


def exhausted_condition(state: RecoveryState, generation: int) -> Obj:
    """``RecoveryExhausted=True``: how many failures of which class, and that retries go on."""
    return condition(
        RECOVERY_EXHAUSTED,
        "True",
        RECOVERY_EXHAUSTED,
        f"{state.failures} consecutive failures, the last of class {state.failure_class}: "
        f"retries continue every {round(policy(state.failure_class).cap)} s at most; set "
        "spec.suspend: true to stop them, or change the spec to start over",
        generation,
    )


def settle(
    old: Obj, generation: int, state: RecoveryState | None, phase: str, spec: str = ""
) -> RecoveryState:
    """The state a pass in ``phase`` over a spec of digest ``spec`` writes: the one it
    decided (None: what ``old`` records), cleared when the Workspace is stopped; the stable
    stretch ends when it is not Active."""
    settled = state if state is not None else RecoveryState.of(old, generation, spec)
    if phase in STOPPED and (settled.failures or _int(old.get(RESTARTS_FIELD))):
        settled = settled.cleared()
    if phase != "Active" and settled.last_stable_at is not None:
        settled = replace(settled, last_stable_at=None)
    return settled


def apply(status: Obj, state: RecoveryState) -> None:
    """Write ``state`` into ``status`` (in place): its fields, and ``RecoveryExhausted`` gone
    with the failures it reported."""
    for key, value in state.fields().items():
        if value is None:
            status.pop(key, None)
        else:
            status[key] = value
    if state.restarts_cleared and RESTARTS_FIELD in status:
        status[RESTARTS_FIELD] = 0
    if state.spec and (state.failures or _int(status.get(RESTARTS_FIELD))):
        status[SPEC_FIELD] = state.spec
    else:
        status.pop(SPEC_FIELD, None)
    if not state.failures:
        kept = remove_conditions(status.get("conditions") or [], [RECOVERY_EXHAUSTED])
        status["conditions"] = kept


def stability(state: RecoveryState, old: Obj, now: datetime) -> tuple[RecoveryState, float | None]:
    """For an Active Workspace: start the stable stretch, or clear the record once it lasted
    ``STABILITY_WINDOW``; with the seconds until it will have (None: nothing to clear)."""
    if not state.failures and not _int(old.get(RESTARTS_FIELD)):
        return state, None
    if state.last_stable_at is None:
        return replace(state, last_stable_at=now), STABILITY_WINDOW
    stable = (now - state.last_stable_at).total_seconds()
    if stable >= STABILITY_WINDOW:
        return state.cleared(), None
    return state, STABILITY_WINDOW - stable
