"""The safety rules the Workspace wing holds, one named test each, so a deliberate bug fails a
test that says which rule broke, not only a golden diff.

Each rule is checked at its exact bound (one second before: not yet; at the bound: acted on)
through the pure decision modules (``reconcile.idle``, ``recovery.policy``, ``decision``,
``failures``, ``stuck``, ``boot``, ``agent.drain``, ``pod.ownership``), and the deadlines once
more through the reconciler on the fake clock against the API server:

- an idle Workspace is suspended exactly at its idle bound, a pod exactly at its lifetime, and
  a suspended Workspace ends exactly at its TTL, each with its reason and metric;
- each failure class retries with its own backoff up to its threshold and starts one
  ``RecoveryExhausted`` episode exactly at it (retries go on at the capped backoff);
- a pod that does not start is replaced exactly at its threshold, never before;
- a boot failure is never a recovery attempt and never replaces the pod;
- a drain holds a recycle no longer than its stall bound, nor than four of them in all;
- an object at the Workspace's names that the controller did not create is never adopted or
  deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.types import Requeue
from controller.workspace.agent.answers import Session, Status
from controller.workspace.agent.drain import Hold, Proceed, Window, decide
from controller.workspace.agent.view import AgentView
from controller.workspace.pod import ownership
from controller.workspace.pod.facts import pod_facts
from controller.workspace.pod.phase import POD_BUILD_FAILED, observe
from controller.workspace.reconcile import idle
from controller.workspace.recovery import decision
from controller.workspace.recovery.decision import Counted, Exhausted, PodView
from controller.workspace.recovery.policy import RECOVERY_EXHAUSTED, apply
from tests.controller.workspace.agents import Agents, agents, harness
from tests.controller.workspace.conftest import Harness
from tests.controller.workspace.factories import reconcile_until
from tests.controller.workspace.podstates import (
    booted,
    exited,
    pod,
    unschedulable,
    waiting,
)
from wspin.core.clock import format_time
from wspin.core.kinds import PODS, WORKSPACES

Obj = dict[str, Any]
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
CREATED = NOW
"""The pods of ``podstates`` are created at 12:00:00."""

__all__ = ["agents", "harness"]


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def active(spec: Obj, *, started: float, activity: float | None = None) -> Obj:
    """An Active Workspace whose pod started ``started`` seconds ago, its last activity
    ``activity`` seconds ago (None: none recorded)."""
    annotations = {} if activity is None else {idle.LAST_ACTIVITY: format_time(ago(activity))}
    return {
        "metadata": {"annotations": annotations},
        "spec": spec,
        "status": {"phase": "Active", "startTime": format_time(ago(started))},
    }


# -- idle, lifetime and TTL at exactly their bound ---------------------------------------------


def test_an_idle_workspace_is_suspended_exactly_at_its_idle_bound() -> None:
    spec = {"autoSuspend": {"enabled": True, "idleTimeoutSeconds": 3600}}
    before = idle.active_deadline(active(spec, started=9000, activity=3599), NOW)
    assert before == 1.0, "suspended (or not looked at) one second before the idle bound"
    due = idle.active_deadline(active(spec, started=9000, activity=3600), NOW)
    assert isinstance(due, idle.AutoSuspend), "not suspended at the idle bound"
    assert (due.reason, due.metric) == (idle.IDLE, "idle")


def test_an_idle_bound_left_out_is_a_day_and_one_below_a_second_is_too() -> None:
    for auto in ({}, {"idleTimeoutSeconds": 0}):
        spec = {"autoSuspend": auto}
        assert idle.active_deadline(active(spec, started=10**6, activity=86399), NOW) == 1.0
        due = idle.active_deadline(active(spec, started=10**6, activity=86400), NOW)
        assert isinstance(due, idle.AutoSuspend) and due.reason == idle.IDLE


def test_a_pod_is_suspended_exactly_at_its_lifetime_bound() -> None:
    spec = {"timeout": 60}
    assert idle.active_deadline(active(spec, started=59), NOW) == 1.0
    due = idle.active_deadline(active(spec, started=60), NOW)
    assert isinstance(due, idle.AutoSuspend), "not suspended at spec.timeout"
    assert (due.reason, due.metric) == (idle.LIFETIME, "timeout")


def test_idle_is_counted_from_the_pods_start_so_a_resume_buys_a_whole_bound() -> None:
    spec = {"autoSuspend": {"idleTimeoutSeconds": 3600}}
    assert idle.active_deadline(active(spec, started=3599, activity=10**6), NOW) == 1.0
    due = idle.active_deadline(active(spec, started=3600, activity=10**6), NOW)
    assert isinstance(due, idle.AutoSuspend) and due.reason == idle.IDLE


def test_a_suspended_workspace_ends_exactly_at_its_ttl() -> None:
    def suspended(seconds: float) -> Obj:
        return {
            "spec": {"ttlSecondsAfterSuspended": 60},
            "status": {"phase": "Suspended", "suspendedAt": format_time(ago(seconds))},
        }

    assert idle.ttl_left(suspended(59), NOW) == 1.0
    assert idle.ttl_left(suspended(60), NOW) == 0.0  # <= 0: it ends now


# -- the same bounds through the reconciler, on the fake clock ---------------------------------


async def test_the_reconciler_suspends_an_idle_workspace_at_its_bound_not_a_second_before(
    agents: Agents,
) -> None:
    await agents.active(autoSuspend={"idleTimeoutSeconds": 3600})
    live = await agents.h.kube.patch(
        WORKSPACES,
        "ws1",
        {"metadata": {"annotations": {idle.LAST_ACTIVITY: format_time(agents.clock())}}},
        agents.h.namespace,
    )
    await agents.h.synced(agents.h.workspaces, "ws1", live)
    agents.clock.advance(3599)
    assert await agents.h.reconcile() == Requeue(1.0)
    assert (await agents.h.workspace())["status"]["phase"] == "Active"
    assert agents.sample("llmsafespaces_workspace_auto_suspensions_total", reason="idle") == 0
    agents.clock.advance(1)
    await agents.h.reconcile()
    status = (await agents.h.workspace())["status"]
    assert (status["phase"], status["reason"]) == ("Suspending", idle.IDLE)
    assert agents.sample("llmsafespaces_workspace_auto_suspensions_total", reason="idle") == 1


async def test_the_reconciler_suspends_a_pod_at_its_lifetime_not_a_second_before(
    agents: Agents,
) -> None:
    await agents.active(timeout=60)
    agents.clock.advance(59)
    assert await agents.h.reconcile() == Requeue(1.0)
    assert (await agents.h.workspace())["status"]["phase"] == "Active"
    agents.clock.advance(1)
    await agents.h.reconcile()
    status = (await agents.h.workspace())["status"]
    assert (status["phase"], status["reason"]) == ("Suspending", idle.LIFETIME)
    assert agents.sample("llmsafespaces_workspace_auto_suspensions_total", reason="timeout") == 1


async def test_the_reconciler_ends_a_suspended_workspace_at_its_ttl_not_a_second_before(
    agents: Agents,
) -> None:
    await agents.h.apply(suspend=True, ttlSecondsAfterSuspended=60)
    await agents.h.reconcile()
    assert (await agents.h.workspace())["status"]["phase"] == "Suspended"
    agents.clock.advance(59)
    assert await agents.h.reconcile() == Requeue(1.0)
    assert (await agents.h.workspace())["status"]["phase"] == "Suspended"
    assert agents.sample("llmsafespaces_workspace_ttl_expirations_total") == 0
    agents.clock.advance(1)
    await agents.h.reconcile()
    status = (await agents.h.workspace())["status"]
    assert (status["phase"], status["reason"]) == ("Terminated", idle.TTL_EXPIRED)
    assert agents.sample("llmsafespaces_workspace_ttl_expirations_total") == 1


# -- the recovery thresholds, per class, run to the threshold ----------------------------------


def _written(status: Obj, decided: decision.Assessment) -> Obj:
    """The status after the pass, as the reconciler's one write records it."""
    new = {**status, "observedGeneration": 1}
    new["conditions"] = [*(status.get("conditions") or []), *decided.conditions]
    apply(new, decided.state)
    if decided.reason == POD_BUILD_FAILED:
        new["failureReason"] = POD_BUILD_FAILED
    return new


def _crash_loop(code: int, reason: str) -> Callable[[Obj, int, datetime], decision.Assessment]:
    """The n-th pass over a main container restarting after each exit (``code``, ``reason``)."""

    def failing(status: Obj, n: int, now: datetime) -> decision.Assessment:
        last = exited(code, reason, "boom")
        p = pod(inits=booted(), main=waiting("CrashLoopBackOff", restarts=n - 1, last=last))
        p["status"]["phase"] = "Running"
        facts = pod_facts(p)
        seen = observe(facts, "Creating")
        view = PodView(status, 1, p, facts, seen.phase, "Creating", now)
        return decision.assess_pod(view)

    return failing


def _pod_lost(status: Obj, n: int, now: datetime) -> decision.Assessment:
    """A pass after the Active Workspace's pod vanished (again)."""
    return decision.assess_missing(status, 1, "Active", now)


def _rejected(status: Obj, n: int, now: datetime) -> decision.Assessment:
    """A pass whose pod the API server rejects."""
    return decision.assess_build_failure(status, 1, now, "spec.x is refused", rejected=True)


# Threshold, and the backoff after the failure before it and after the one at it (the table in
# ``recovery.policy``), written out here: a changed table must fail this test, not follow it.
THRESHOLDS = {
    "Infrastructure": (_pod_lost, 10, 120.0, 120.0),
    "Resource": (_crash_loop(137, "OOMKilled"), 6, 160.0, 300.0),
    "Process": (_crash_loop(1, "Error"), 6, 160.0, 300.0),
    "Configuration": (_rejected, 3, 60.0, 120.0),
}


@pytest.mark.parametrize("failure_class", list(THRESHOLDS))
def test_each_failure_class_retries_with_its_backoff_and_is_exhausted_exactly_at_its_threshold(
    failure_class: str,
) -> None:
    fail, threshold, wait_before, wait_at = THRESHOLDS[failure_class]
    status: Obj = {"phase": "Creating", "observedGeneration": 1, "conditions": []}
    now = NOW
    for n in range(1, threshold + 2):
        decided = fail(status, n, now)
        (counted,) = [c for c in decided.notices if isinstance(c, Counted)]
        exhausted = [e for e in decided.notices if isinstance(e, Exhausted)]
        crossed = [c for c in decided.conditions if c["type"] == RECOVERY_EXHAUSTED]
        assert (decided.state.failures, decided.state.failure_class) == (n, failure_class)
        (wait,) = counted.backoffs
        assert decided.state.next_retry_at == now + timedelta(seconds=wait)
        if n == threshold - 1:
            assert wait == wait_before
            assert not exhausted and not crossed, f"exhausted at failure {n} of {threshold}"
            assert "recovery is exhausted" not in decided.message
        elif n == threshold:
            assert wait == wait_at
            assert [(e.failure_class, e.failures) for e in exhausted] == [(failure_class, n)]
            assert [c["status"] for c in crossed] == ["True"]
            assert "recovery is exhausted (retries continue" in decided.message
        elif n > threshold:
            assert not exhausted and not crossed, "a second RecoveryExhausted episode"
            assert wait >= wait_at  # retries go on, up to the cap
        else:
            assert not exhausted and not crossed
        status = _written(status, decided)
        if failure_class == "Configuration":
            # The retry is due after the backoff, not a second sooner.
            early = fail(status, n + 1, now + timedelta(seconds=wait - 1))
            assert not [c for c in early.notices if isinstance(c, Counted)]
            assert early.due == 1.0
        now += timedelta(seconds=wait)


# -- a pod that does not start is replaced exactly at its threshold -----------------------------


def _assess(p: Obj, seconds: float) -> decision.Assessment:
    facts = pod_facts(p)
    seen = observe(facts, "Creating")
    at = CREATED + timedelta(seconds=seconds)
    return decision.assess_pod(PodView({}, 1, p, facts, seen.phase, "Creating", at))


STUCK = {
    # what, the pod, when its clock starts (seconds after creation), its threshold, its class
    "unschedulable": (
        pod(node="", conditions=unschedulable("0/3 nodes are available")),
        0.0,
        300.0,
        "Infrastructure",
    ),
    "image-not-pulled": (
        pod(inits=booted(), main=waiting("ImagePullBackOff", "back-off pulling image")),
        20.0,  # the last platform init completed at 12:00:20
        600.0,
        "Configuration",
    ),
    "init-crash-loop": (
        pod(
            inits={
                **booted(),
                "workspace-setup": waiting("CrashLoopBackOff", restarts=3, last=exited(2)),
            },
            setup=True,
        ),
        0.0,
        600.0,
        "Process",
    ),
}


@pytest.mark.parametrize("case", list(STUCK))
def test_a_pod_that_does_not_start_is_replaced_exactly_at_its_threshold(case: str) -> None:
    p, since, threshold, failure_class = STUCK[case]
    before = _assess(p, since + threshold - 1)
    assert not before.delete_pod, "replaced a second before its threshold"
    assert before.state.failures == 0 and before.reason
    assert before.due == 1.0
    at = _assess(p, since + threshold)
    assert at.delete_pod, "not replaced at its threshold"
    assert (at.state.failures, at.state.failure_class) == (1, failure_class)


def test_a_boot_failure_is_never_a_recovery_attempt_and_never_replaces_the_pod() -> None:
    status: Obj = {"observedGeneration": 1}
    for restarts in range(12):
        failing = waiting("CrashLoopBackOff", restarts=restarts, last=exited(1, message="no"))
        p = pod(inits={"platform-init": failing}, main=waiting("PodInitializing"))
        decided = _assess(p, 3600.0 * (restarts + 1))
        assert decided.reason == "PlatformBootFailed"
        assert not decided.delete_pod, "a boot failure replaced the pod"
        assert decided.state.failures == 0, "a boot failure was counted"
        assert not [n for n in decided.notices if isinstance(n, Counted | Exhausted)]
        status = _written(status, decided)


# -- a drain never holds a recycle past its bounds ---------------------------------------------


def _busy_view(changes: int) -> AgentView:
    sessions = (Session("s1", "", "busy", 10),)
    status = Status(healthy=True, ready=True, sessions=sessions, sessions_active=1)
    return AgentView(status=status, status_epoch=1, busy_changes=changes)


STALL = 3600.0


def test_a_drain_never_holds_a_recycle_past_its_stall_bound() -> None:
    window = Window("10.0.0.7", started=ago(STALL), epoch=1, progress_at=ago(STALL), busy_changes=0)
    held, _ = decide(window, _busy_view(0), NOW - timedelta(seconds=1), STALL)
    assert held == Hold(1.0, busy=1, announce=True)
    forced, _ = decide(window, _busy_view(0), NOW, STALL)
    assert isinstance(forced, Proceed) and forced.outcome == "forced"


def test_a_drain_with_progress_never_holds_a_recycle_past_four_stall_bounds() -> None:
    started = ago(4 * STALL)
    window = Window("10.0.0.7", started=started, epoch=1, progress_at=NOW, busy_changes=0)
    held, window = decide(window, _busy_view(1), NOW - timedelta(seconds=1), STALL)
    assert isinstance(held, Hold) and held.after == 1.0
    forced, _ = decide(window, _busy_view(2), NOW, STALL)
    assert isinstance(forced, Proceed) and forced.outcome == "forced"
    assert "the longest a drain may take" in forced.detail


# -- what the controller did not create is never its own ---------------------------------------


WS: Obj = {"metadata": {"name": "ws1", "namespace": "team-a", "uid": "uid-of-ws1"}}


def test_a_forged_owner_reference_without_the_owner_label_is_never_the_workspaces() -> None:
    forged: Obj = {
        "metadata": {
            "name": "ws1-uidofws1",
            "labels": {"app": "llmsafespaces", "component": "workspace"},
            "ownerReferences": [
                {
                    "apiVersion": "llmsafespaces.dev/v1",
                    "kind": "Workspace",
                    "name": "ws1",
                    "uid": "uid-of-ws1",
                    "controller": True,
                }
            ],
        }
    }
    assert ownership.conflict_of(forged, WS, "Pod") is not None
    with pytest.raises(ownership.ForeignObject):
        ownership.check_owned(forged, WS, "Pod")
    labelled = {**forged["metadata"], "labels": {"llmsafespaces.dev/workspace-uid": "uid-other"}}
    assert ownership.conflict_of({"metadata": labelled}, WS, "Pod") is not None


async def test_a_foreign_pod_at_the_workspaces_name_is_never_deleted(harness: Harness) -> None:
    h = harness
    await h.apply()
    name = await h.pod_name()
    squatter: Obj = {
        "metadata": {
            "name": name,
            "namespace": h.namespace,
            "labels": {"app": "llmsafespaces", "component": "workspace"},
        },
        "spec": {"containers": [{"name": "workspace", "image": "docker.io/attacker/x:1"}]},
    }
    planted = await h.kube.create(PODS, squatter, h.namespace)
    await h.settle()
    await h.reconcile()
    live = await h.kube.patch(WORKSPACES, "ws1", {"spec": {"suspend": True}}, h.namespace)
    await h.synced(h.workspaces, "ws1", live)
    await reconcile_until(h, "Suspended")
    await h.kube.delete(WORKSPACES, "ws1", h.namespace)
    for _ in range(3):
        await h.reconciler.reconcile(h.key())
    assert await h.kube.get_or_none(WORKSPACES, "ws1", h.namespace) is None
    found = await h.kube.get(PODS, name, h.namespace)
    assert found["metadata"]["uid"] == planted["metadata"]["uid"]
    assert not found["metadata"].get("deletionTimestamp"), "a foreign pod was deleted"
