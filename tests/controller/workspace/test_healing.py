"""One pass's recovery decision for a Workspace with a pod: what is counted (once), what is
reported, what is replaced, and when the record clears."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from controller.workspace.pod.facts import pod_facts
from controller.workspace.pod.phase import observe
from controller.workspace.recovery import decision
from controller.workspace.recovery.decision import (
    BootFailed,
    Counted,
    Exhausted,
    PodView,
    Recovered,
)
from controller.workspace.recovery.policy import RECOVERY_EXHAUSTED, RecoveryState, apply
from tests.controller.workspace.podstates import (
    booted,
    exited,
    pod,
    running,
    unschedulable,
    waiting,
)
from wspin.core.objects import Obj

CREATED = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def assess(
    p: Obj, status: Obj, seconds: float = 60, previous: str = "Creating", **more: Any
) -> decision.Assessment:
    facts = pod_facts(p)
    seen = observe(facts, previous)
    return decision.assess_pod(
        PodView(
            status=status,
            generation=1,
            pod=p,
            facts=facts,
            phase=seen.phase,
            previous=previous,
            now=CREATED + timedelta(seconds=seconds),
            **more,
        )
    )


def written(status: Obj, decided: decision.Assessment) -> Obj:
    """The status after the pass: the recovery fields and conditions as the write sends them."""
    new = {**status, "observedGeneration": 1}
    new["conditions"] = [*(status.get("conditions") or []), *decided.conditions]
    apply(new, decided.state)
    return new


def crashing(restarts: int, code: int = 1, reason: str = "Error") -> Obj:
    main = waiting("CrashLoopBackOff", restarts=restarts, last=exited(code, reason, "boom"))
    return pod(inits=booted(), main=main, phase="Running")


def test_a_crash_loop_counts_each_exit_once_with_its_backoff() -> None:
    status: Obj = {"observedGeneration": 1}
    waits = []
    for restarts in range(5):
        for _ in range(2):  # a second pass over the same state counts nothing
            decided = assess(crashing(restarts), status)
            status = written(status, decided)
            waits += [n.backoffs for n in decided.notices if isinstance(n, Counted)]
    assert status["consecutiveFailures"] == 5 and status["lastFailureClass"] == "Process"
    assert waits == [(10.0,), (20.0,), (40.0,), (80.0,), (160.0,)]
    assert decided.reason == "CrashLoopBackOff"
    assert "exit 1, Error; 4 restarts" in decided.message and "it said: boom" in decided.message
    assert "kubectl logs -n team-a ws1-b8985526 -c workspace --previous" in decided.message
    assert decided.message.endswith("the next try is due at 2026-11-29T12:03:40Z")


def test_a_pod_first_seen_counts_its_current_exit_and_never_its_history() -> None:
    long_lived = pod(inits=booted(), main={**running(), "restartCount": 30}, phase="Running")
    long_lived["status"]["containerStatuses"][0]["lastState"] = {"terminated": exited(137)}
    decided = assess(long_lived, {"observedGeneration": 1}, previous="Active")
    assert decided.state == RecoveryState() and not decided.notices  # nothing to write
    crashing_now = assess(crashing(5), {"observedGeneration": 1})
    assert crashing_now.state.failures == 1
    assert crashing_now.notices == [Counted("Process", (10.0,))]


def test_the_sixth_process_failure_exhausts_recovery_once() -> None:
    status: Obj = {"observedGeneration": 1}
    crossings = []
    for restarts in range(8):
        decided = assess(crashing(restarts), status)
        status = written(status, decided)
        crossings += [(restarts + 1, n) for n in decided.notices if isinstance(n, Exhausted)]
    assert [(n, notice.failures) for n, notice in crossings] == [(6, 6)]
    (condition,) = [c for c in status["conditions"] if c["type"] == RECOVERY_EXHAUSTED]
    assert condition["status"] == "True" and "class Process" in condition["message"]
    assert "recovery is exhausted (retries continue" in decided.message


def test_an_oom_crash_loop_is_a_resource_failure_naming_the_limit() -> None:
    decided = assess(crashing(2, 137, "OOMKilled"), {"observedGeneration": 1})
    assert decided.state.failure_class == "Resource" and decided.state.failures == 1
    assert decided.reason == "OOMKilled"
    assert "limit (2Gi)" in decided.message and "spec.memoryLimit" in decided.message


def test_verification_exits_are_never_counted_as_crashes_even_later() -> None:
    status: Obj = {"observedGeneration": 1}
    decided = assess(crashing(3, 81), status, verify_failed=True)
    assert decided.state.failures == 0 and not decided.notices
    status = written(status, decided)
    assert status["lastFailedPod"]["containerExits"] == 4
    # The verifier's verdict goes (a different exit follows): only the new exit counts.
    decided = assess(crashing(4, 1), status)
    assert decided.state.failures == 1


def test_a_pod_that_ended_counts_once_however_many_passes_see_it() -> None:
    evicted = pod(
        inits=booted(),
        main=running(),
        phase="Failed",
        reason="Evicted",
        message="The node was low on resource: memory.",
    )
    status: Obj = {"observedGeneration": 1}
    decided = assess(evicted, status)
    assert decided.state.failures == 1 and decided.state.failure_class == "Infrastructure"
    assert decided.notices == [Counted("Infrastructure", (5.0,), "Evicted")]
    assert decided.reason == "PodEvicted" and "low on resource: memory" in decided.message
    again = assess(evicted, written(status, decided))
    assert again.state.failures == 1 and not again.notices


def test_a_disruption_counts_and_a_plain_deletion_does_not() -> None:
    drained = pod(
        inits=booted(),
        main=running(),
        phase="Running",
        conditions=[
            {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
        ],
    )
    drained["metadata"]["deletionTimestamp"] = "2026-11-29T12:01:00Z"
    decided = assess(drained, {"observedGeneration": 1}, previous="Active")
    assert decided.notices == [Counted("Infrastructure", (5.0,), "EvictionByEvictionAPI")]
    deleted = pod(inits=booted(), main=running(), phase="Running")
    deleted["metadata"]["deletionTimestamp"] = "2026-11-29T12:01:00Z"
    assert not assess(deleted, {"observedGeneration": 1}, previous="Active").notices


def stopped(p: Obj) -> Obj:
    """``p`` once the kubelet has stopped it for its deletion: it marks the pod Failed (its
    containers killed) before the pod goes."""
    p["status"]["phase"] = "Failed"
    p["status"]["containerStatuses"][0].update(ready=False, state={"terminated": exited(137)})
    return p


def test_a_drained_pod_the_kubelet_stopped_is_one_disruption() -> None:
    drained = pod(
        inits=booted(),
        main=running(),
        phase="Running",
        conditions=[
            {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
        ],
    )
    drained["metadata"]["deletionTimestamp"] = "2026-11-29T12:01:00Z"
    status = written({"observedGeneration": 1}, assess(drained, {}, previous="Active"))
    again = assess(stopped(drained), status, previous="Creating")
    assert again.reason == "PodDisrupted" and not again.notices
    # Seen only once stopped (or marked Failed by the pod GC): the same one disruption.
    first = assess(drained, {"observedGeneration": 1}, previous="Active")
    assert first.reason == "PodDisrupted"
    assert first.notices == [Counted("Infrastructure", (5.0,), "EvictionByEvictionAPI")]


def test_a_deleted_pod_the_kubelet_stopped_is_no_failure() -> None:
    deleted = pod(inits=booted(), main=running(), phase="Running")
    deleted["metadata"]["deletionTimestamp"] = "2026-11-29T12:01:00Z"
    decided = assess(stopped(deleted), {"observedGeneration": 1}, previous="Active")
    assert decided.state.failures == 0 and not decided.notices and not decided.reason


def test_a_stuck_pod_is_reported_before_its_threshold_and_replaced_at_it() -> None:
    p = pod(node="", conditions=unschedulable("0/3 nodes are available: 3 Insufficient cpu."))
    early = assess(p, {"observedGeneration": 1}, seconds=240, previous="Pending")
    assert early.reason == "Unschedulable" and not early.delete_pod and not early.notices
    assert early.due == 60
    late = assess(p, {"observedGeneration": 1}, seconds=301, previous="Pending")
    assert late.delete_pod and late.notices == [Counted("Infrastructure", (5.0,), "Unschedulable")]
    assert "the pod is replaced" in late.message
    # While the replaced pod stops it keeps saying why, and nothing is counted again.
    status = written({"observedGeneration": 1}, late)
    status.update(reason=late.reason, message=late.message)
    stopping = pod(inits=booted(), main=waiting("ContainerCreating"), phase="Pending")
    stopping["metadata"]["deletionTimestamp"] = "2026-11-29T12:05:02Z"
    again = assess(stopping, status, seconds=302, previous="Pending")
    assert (again.reason, again.message) == (late.reason, late.message) and not again.notices


def test_a_platform_boot_failure_is_reported_and_never_a_recovery() -> None:
    crash = waiting("CrashLoopBackOff", restarts=6, last=exited(1, message="no relay config"))
    p = pod(
        inits=booted(**{"platform-materialize": crash}),
        main=waiting("PodInitializing"),
    )
    decided = assess(p, {"observedGeneration": 1}, seconds=3600)
    assert decided.boot is not None and decided.boot.container == "platform-materialize"
    assert not decided.delete_pod and decided.state.failures == 0 and not decided.notices
    (ready,) = decided.conditions
    assert (ready["type"], ready["status"], ready["reason"]) == (
        "BootReady",
        "False",
        "PlatformBootFailed",
    )
    assert ready["message"] == "platform-materialize: exit 1 (Error): no relay config"
    # The next pass finds the episode recorded: not new again.
    assert assess(p, written({"observedGeneration": 1}, decided)).boot is None
    assert not any(isinstance(n, BootFailed) for n in decided.notices)  # confirmed live first


def test_a_crashing_sidecar_suspends_the_count_of_the_crashes_it_causes() -> None:
    sidecar = waiting("CrashLoopBackOff", restarts=2, last=exited(2))
    main = waiting("CrashLoopBackOff", restarts=2, last=exited(1))
    decided = assess(
        pod(sidecar=True, inits=booted(agentd=sidecar), main=main, phase="Running"), {}
    )
    assert decided.reason == "PlatformBootFailed" and decided.state.failures == 0


def test_active_again_reports_the_recovery_and_clears_after_the_stable_window() -> None:
    status = written({"observedGeneration": 1}, assess(crashing(0), {"observedGeneration": 1}))
    ready = pod(inits=booted(), main=running(), phase="Running", podIP="10.0.0.7")
    ready["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    ready["status"]["containerStatuses"][0]["restartCount"] = 1
    decided = assess(ready, status, seconds=90)
    assert decided.notices == [Recovered("Process", 30.0)]
    assert decided.state.last_stable_at == CREATED + timedelta(seconds=90) and decided.due == 120
    assert decided.reason == "" and decided.conditions[-1]["type"] == "BootReady"
    status = written(status, decided)
    later = assess(ready, status, seconds=210, previous="Active")
    assert later.state.failures == 0 and later.due is None and not later.notices
    assert written(status, later).get("consecutiveFailures") is None


def test_a_pod_that_cannot_be_built_counts_once_per_backoff_and_only_a_rejection_waits() -> None:
    status: dict[str, Any] = {"observedGeneration": 1}
    for rejected, retry_at in ((True, "2026-11-29T12:00:30Z"), (False, None)):
        first = decision.assess_build_failure(status, 1, CREATED, "no", rejected=rejected)
        assert [type(n) for n in first.notices] == [Counted] and first.due == 30
        assert first.state.fields()["nextRetryAt"] == retry_at
        assert first.message == (
            "no; failure 1 in a row (Configuration); the next try is due at 2026-11-29T12:00:30Z"
        )
        written = {**status, "failureReason": "PodBuildFailed"}
        apply(written, first.state)
        # Passes before the backoff has passed count nothing; the one after counts the next.
        later = decision.assess_build_failure(
            written, 1, CREATED + timedelta(seconds=10), "no", rejected=rejected
        )
        assert later.notices == [] and later.due == 20 and later.state.failures == 1
        due = decision.assess_build_failure(
            written, 1, CREATED + timedelta(seconds=30), "no", rejected=rejected
        )
        assert due.state.failures == 2 and due.due == 60
