"""One pass's recovery decision for a Workspace that should run. Pure.

``assess_pod`` looks at the Workspace's pod once, in this order:

1. a pod that ended (evicted, its node lost, …) or that is being deleted as a disruption
   (an API eviction, a preemption, the taint manager) has failed as a whole; one a user or
   this controller deleted has not, though the kubelet marks it Failed before it goes;
2. a platform boot failure (``boot``) is reported and nothing else is decided about the pod:
   it is kept, and its failure is not a recovery attempt;
3. a pod that is not starting (``stuck``) is reported at once, and fails as a whole once its
   threshold has passed: the pod is deleted and replaced after the class's backoff;
4. the exits of its main containers (``failures.crash_count``) are failures, except while the
   workspace container reports a verification failure (exit 81 to 84: a verification episode,
   never a crash) or the boot fails; a pod seen for the first time counts only the exit it is
   failing from now, never its whole restart history;
5. every failure not counted before is counted (``recovery``); crossing the class's threshold
   starts a ``RecoveryExhausted`` episode;
6. once the Workspace is Active again its record clears after the stability window.

``assess_missing`` decides for a Workspace without a pod: one lost while Active has failed
(class Infrastructure); a new pod waits for ``nextRetryAt``.

``assess_build_failure`` decides for a Workspace whose pod cannot be built (a field the
builder refuses, a pod the API server rejects): a Configuration failure, counted once per try,
and tried again when the class's backoff has passed (a spec change starts over at once).

What to report once the status is written travels as notices (``Counted``, ``Exhausted``,
``Recovered``, ``BootFailed``), so a failed status write never reports an episode twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Final

from controller.toolkit.conditions import is_true
from controller.types import Obj
from controller.workspace.pod.facts import PodFacts
from controller.workspace.pod.phase import POD_BUILD_FAILED
from controller.workspace.recovery import boot, causes, stuck
from controller.workspace.recovery import failures as fl
from controller.workspace.recovery.pod_events import PodEvent
from controller.workspace.recovery.policy import (
    RECOVERY_EXHAUSTED,
    RecoveryState,
    exhausted_condition,
    policy,
    stability,
)
from wspin.core.clock import format_time
from wspin.core.fleet import Phase
from wspin.core.workspace import WorkspaceStatus

CRASH_LOOP: Final = "CrashLoopBackOff"
POD_ENDED: Final = "PodEnded"
POD_EVICTED: Final = "PodEvicted"
POD_DISRUPTED: Final = "PodDisrupted"


@dataclass(frozen=True)
class Counted:
    """Failures counted this pass: ``backoffs`` holds each one's wait; ``pod_reason`` the
    reason of a pod that failed as a whole ("" for container exits)."""

    failure_class: str
    backoffs: tuple[float, ...]
    pod_reason: str = ""


@dataclass(frozen=True)
class Exhausted:
    """A ``RecoveryExhausted`` episode starts."""

    failure_class: str
    failures: int
    message: str


@dataclass(frozen=True)
class Recovered:
    """The Workspace is Active again after failures."""

    failure_class: str
    seconds: float


@dataclass(frozen=True)
class BootFailed:
    """A boot failure episode starts (confirmed new against the live Workspace)."""

    failure: boot.BootFailure
    described: str
    pod: str = ""
    """The uid of the pod it happened in (one episode per pod and container)."""


Notice = Counted | Exhausted | Recovered | BootFailed


@dataclass
class Assessment:
    """What the pass decided about recovery."""

    state: RecoveryState
    delete_pod: bool = False
    """The pod failed as a whole and is still there: delete it."""
    reason: str = ""
    """The Ready reason (and ``status.reason``) while the Workspace is not Active."""
    message: str = ""
    conditions: list[Obj] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    due: float | None = None
    """Seconds until the decision may change without an event (a threshold, a retry)."""
    boot: boot.BootFailure | None = None
    """A boot failure the cached status does not report yet (new if the live one agrees)."""
    missing_secret: str = ""

    def wake(self, seconds: float | None) -> None:
        if seconds is not None and (self.due is None or seconds < self.due):
            self.due = seconds


@dataclass(frozen=True)
class PodView:
    """Everything ``assess_pod`` reads: the Workspace's status, its pod and the moment."""

    status: Obj
    generation: int
    pod: Obj
    facts: PodFacts
    phase: Phase
    """The phase the pod's facts give (``lifecycle.observe``)."""
    previous: str
    now: datetime
    verify_failed: bool = False
    spec: str = ""
    """The digest of the Workspace's spec (``recovery.spec_digest``)."""
    events: Sequence[PodEvent] = ()
    redact: Callable[[str], str] = lambda text: text


def _retry(state: RecoveryState, now: datetime, due: datetime | None = None) -> str:
    note = f"failure {state.failures} in a row ({state.failure_class})"
    due = due or state.next_retry_at
    if due is not None and due > now:
        note += f"; the next try is due at {format_time(due)}"
    if state.failures >= policy(state.failure_class).exhausted_after:
        note += "; recovery is exhausted (retries continue: spec.suspend: true stops them)"
    return note


def _count(
    result: Assessment,
    status: Obj,
    generation: int,
    now: datetime,
    failure: fl.Failure,
    count: int,
    *,
    pod_level: bool,
) -> None:
    """Count ``count`` failures of ``failure``'s class; one crossing the class's threshold
    starts a ``RecoveryExhausted`` episode (unless one is on record already)."""
    before = result.state
    result.state = before.record(failure, count, now)
    rule = policy(failure.failure_class)
    waits = tuple(rule.backoff(before.failures + n) for n in range(1, count + 1))
    result.notices.append(
        Counted(failure.failure_class, waits, failure.reason if pod_level else "")
    )
    reported = before.failures > 0 and is_true(
        WorkspaceStatus.of(status).conditions, RECOVERY_EXHAUSTED
    )
    if not reported and result.state.failures >= rule.exhausted_after:
        crossed = exhausted_condition(result.state, generation)
        result.conditions.append(crossed)
        result.notices.append(
            Exhausted(failure.failure_class, result.state.failures, crossed["message"])
        )


def _pod_failure(view: PodView, result: Assessment) -> fl.Failure | None:
    """The failure of the pod as a whole, if it failed as a whole (reported into ``result``)."""
    facts = view.facts
    disrupted = fl.disruption(view.pod) is not None
    # The kubelet marks every pod it stops for a deletion Failed (or Succeeded) before the pod
    # goes: a deleted pod that ended failed only when a disruption or the node ended it, never
    # when someone (a user, this controller replacing it) deleted it.
    ended = facts.terminal and (
        not facts.deleting or disrupted or facts.reason in fl.INFRASTRUCTURE_REASONS
    )
    if ended or (facts.deleting and disrupted):
        failure = fl.classify(view.pod)
        said = causes.quote(failure.message, view.redact) if failure.message else ""
        if failure.reason == fl.EVICTED:
            result.reason = POD_EVICTED
        elif not facts.terminal or (disrupted and not facts.reason):
            # Deleted as a disruption (drained, preempted, by the taint manager or the pod
            # GC): still so once the kubelet has stopped it, which gives no reason of its own.
            result.reason = POD_DISRUPTED
        else:
            result.reason = POD_ENDED
        said = f": {said}" if said else ""
        why = causes.quote(failure.reason, view.redact)
        result.message = f"the workspace pod was stopped ({why}{said})"
        return failure
    if facts.deleting:
        return None
    found_boot = boot.boot_failure(view.pod)
    if found_boot is not None:
        described = causes.quote(found_boot.describe(), view.redact)
        result.conditions.append(boot.failed_condition(found_boot, view.generation, described))
        result.reason, result.message = boot.PLATFORM_BOOT_FAILED, described
        if not boot.reported(WorkspaceStatus.of(view.status).conditions, found_boot.container):
            result.boot = found_boot
        return None
    created = facts.created or view.now
    found = stuck.detect(
        view.pod,
        created=created,
        now=view.now,
        events=view.events,
        redact=view.redact,
    )
    if found is None:
        return None
    result.reason, result.message = found.reason, found.message
    result.missing_secret = found.missing_secret
    if not found.overdue(view.now):
        result.wake((found.due - view.now).total_seconds())
        return None
    result.delete_pod = True
    result.message += "; the pod is replaced"
    return found.failure()


def _crash(view: PodView, result: Assessment, crash: fl.Crash | None) -> fl.Failure | None:
    """The failure of the latest main-container exit ``crash`` (its message reported while the
    container waits to restart), or None."""
    if crash is None:
        return None
    if crash.waiting and not result.reason:
        result.reason, result.message = _crash_message(view.pod, crash, view.redact)
    reason = crash.reason if crash.reason == fl.OOM_KILLED else CRASH_LOOP
    return fl.Failure(crash.failure_class, reason, crash.message, crash.container)


def _crash_message(pod: Obj, crash: fl.Crash, redact: Callable[[str], str]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    log = (
        f"kubectl logs -n {meta.get('namespace', '')} {meta.get('name', '')} "
        f"-c {crash.container} --previous"
    )
    if crash.reason == fl.OOM_KILLED:
        return fl.OOM_KILLED, (
            f"container {crash.container} was killed for using more memory than its limit "
            f"({_memory_limit(pod, crash.container) or 'none set'}): raise spec.memoryLimit "
            f"(or spec.memory); its log: {log}"
        )
    said = f"; it said: {causes.quote(crash.message, redact)}" if crash.message else ""
    ended = f"exit {crash.exit_code}" + (f", {crash.reason}" if crash.reason else "")
    return CRASH_LOOP, (
        f"container {crash.container} keeps exiting ({ended}; {crash.restarts} restarts): "
        f"its log: {log}{said}"
    )


def _memory_limit(pod: Obj, container: str) -> str:
    for item in (pod.get("spec") or {}).get("containers") or ():
        if isinstance(item, dict) and item.get("name") == container:
            limits = (item.get("resources") or {}).get("limits") or {}
            return str(limits.get("memory") or "") if isinstance(limits, dict) else ""
    return ""


def assess_pod(view: PodView) -> Assessment:
    """The recovery decision for a Workspace whose pod is ``view.pod`` (see the module)."""
    result = Assessment(RecoveryState.of(view.status, view.generation, view.spec))
    uid = str((view.pod.get("metadata") or {}).get("uid") or "")
    whole = _pod_failure(view, result)
    exits, counted = fl.crash_count(view.pod), result.state.exits(uid)
    failed = result.state.failed(uid)
    stopping = view.facts.terminal or view.facts.deleting
    if view.verify_failed or result.reason == boot.PLATFORM_BOOT_FAILED:
        # The verifier's exits and a failing boot are episodes of their own: what the main
        # containers did meanwhile is passed over, never counted later.
        result.state = result.state.seen(uid, max(counted, exits), failed)
    elif not stopping:
        last = fl.last_crash(view.pod)
        crash = _crash(view, result, last)
        if result.state.pod != uid and last is not None:
            # A pod seen for the first time (one that ran before this controller, an upgrade)
            # counts only the exit it is failing from now: its older restarts are history,
            # not a crash loop this record has watched.
            counted = max(0, exits - (1 if last.waiting else 0))
        if crash is not None and exits > counted:
            result.state = result.state.seen(uid, exits, failed)
            _count(
                result, view.status, view.generation, view.now, crash, exits - counted,
                pod_level=False,
            )  # fmt: skip
    if whole is not None and not failed:
        result.state = result.state.seen(uid, max(counted, result.state.exits(uid)), True)
        _count(result, view.status, view.generation, view.now, whole, 1, pod_level=True)
    state = result.state
    if view.facts.deleting and not result.reason and state.failed(uid):
        # Replaced after a failure: the pod says why while it stops, as the wait after it will.
        recorded = WorkspaceStatus.of(view.status)
        result.reason, result.message = recorded.reason, recorded.message
    elif view.phase == "Active":
        # Serving again: whatever retry was pending has happened.
        state = replace(state, next_retry_at=None)
        result.reason = result.message = ""
        result.conditions.append(boot.ready_condition(view.generation))
        if view.previous != "Active" and state.failures and state.last_failure_at is not None:
            seconds = (view.now - state.last_failure_at).total_seconds()
            result.notices.append(Recovered(state.failure_class, max(0.0, seconds)))
        result.state, wait = stability(state, view.status, view.now)
        result.wake(wait)
    elif result.reason and state.failures:
        result.message = f"{result.message}; {_retry(state, view.now)}"
    return result


def assess_missing(
    status: Obj, generation: int, previous: str, now: datetime, spec: str = ""
) -> Assessment:
    """For a Workspace without a pod: a pod lost while Active is an Infrastructure failure; a
    new pod waits until the retry is due (``due`` set: wait that long, create nothing)."""
    result = Assessment(RecoveryState.of(status, generation, spec))
    if previous == "Active":
        lost = fl.classify(None)
        _count(result, status, generation, now, lost, 1, pod_level=True)
        result.reason = lost.reason
        result.message = f"{lost.message}; {_retry(result.state, now)}"
    else:
        # Worded by the pass that counted the failure; kept while its retry waits.
        recorded = WorkspaceStatus.of(status)
        result.reason, result.message = recorded.reason, recorded.message
    wait = result.state.retry_wait(now)
    if wait is None:
        result.state = replace(result.state, next_retry_at=None)
        result.reason = result.message = ""
    result.wake(wait)
    return result


def assess_build_failure(
    status: Obj, generation: int, now: datetime, problem: str, *, rejected: bool, spec: str = ""
) -> Assessment:
    """For a Workspace whose pod cannot be built (``problem`` says why and what fixes it): a
    Configuration failure, counted again only once the class's backoff after the last one has
    passed (the passes in between, its own status write's included, count nothing).

    A pod the API server ``rejected`` is sent again no earlier than ``nextRetryAt``; one the
    builder refuses is built as soon as its cause is gone (the spec, the Namespace's labels
    and the runtime catalogue are watched), so it sets no ``nextRetryAt``."""
    result = Assessment(RecoveryState.of(status, generation, spec))
    state = result.state
    due = None
    if (
        WorkspaceStatus.of(status).failure_reason == POD_BUILD_FAILED
        and state.last_failure_at is not None
    ):
        due = state.last_failure_at + timedelta(seconds=state.backoff())
    if state.failures and due is not None and due > now:
        wait = (due - now).total_seconds()
    else:
        failure = fl.Failure(fl.CONFIGURATION, POD_BUILD_FAILED, problem)
        _count(result, status, generation, now, failure, 1, pod_level=False)
        wait = result.state.backoff()
        due = now + timedelta(seconds=wait)
        if not rejected:
            result.state = replace(result.state, next_retry_at=None)
    result.reason = POD_BUILD_FAILED
    result.message = f"{problem}; {_retry(result.state, now, due)}"
    result.wake(wait)
    return result
