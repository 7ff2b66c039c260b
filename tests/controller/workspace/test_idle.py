"""The deadlines a Workspace runs on by itself: idle suspend, the pod's lifetime, the time a
suspended Workspace is kept; decided at each pass and looked at again exactly when due."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from controller.types import Requeue
from controller.workspace.reconcile import idle
from tests.controller.workspace.agents import Agents, agents, harness
from tests.controller.workspace.factories import reconcile_until
from wspin.core.clock import format_time
from wspin.core.kinds import PODS, PVCS, WORKSPACES
from wspin.core.objects import Obj

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

__all__ = ["agents", "harness"]


def ws(
    *,
    activity: datetime | None = None,
    started: datetime | None = None,
    status_activity: datetime | None = None,
    spec: Obj | None = None,
) -> Obj:
    annotations = {idle.LAST_ACTIVITY: format_time(activity)} if activity else {}
    status: Obj = {"phase": "Active"}
    if started is not None:
        status["startTime"] = format_time(started)
    if status_activity is not None:
        status["lastActivityAt"] = format_time(status_activity)
    return {"metadata": {"annotations": annotations}, "spec": spec or {}, "status": status}


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


# -- the deadlines (pure) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("auto", "expected"),
    [
        (None, None),  # no autoSuspend at all (an API server that did not default it)
        ({}, 86400),
        ({"enabled": True, "idleTimeoutSeconds": 3600}, 3600),
        ({"enabled": False, "idleTimeoutSeconds": 3600}, None),
        ({"idleTimeoutSeconds": 0}, 86400),
        ({"idleTimeoutSeconds": -5}, 86400),
        ({"idleTimeoutSeconds": "soon"}, 86400),
    ],
)
def test_the_idle_timeout(auto: Obj | None, expected: int | None) -> None:
    spec = {} if auto is None else {"autoSuspend": auto}
    assert idle.idle_timeout(ws(spec=spec)) == expected


AUTO: Obj = {"autoSuspend": {"enabled": True, "idleTimeoutSeconds": 3600}}


def test_idle_past_the_timeout_suspends() -> None:
    due = idle.active_deadline(ws(activity=ago(7200), started=ago(9000), spec=AUTO), NOW)
    assert isinstance(due, idle.AutoSuspend)
    assert (due.reason, due.metric) == (idle.IDLE, "idle")
    assert due.message == "no activity for 1h (spec.autoSuspend.idleTimeoutSeconds)"


def test_activity_within_the_timeout_is_a_deadline_at_its_end() -> None:
    assert idle.active_deadline(ws(activity=ago(1800), started=ago(9000), spec=AUTO), NOW) == 1800


def test_a_workspace_with_no_recorded_activity_is_never_idle() -> None:
    assert idle.active_deadline(ws(started=ago(10**6), spec=AUTO), NOW) is None


def test_the_deprecated_status_field_is_read_when_the_annotation_is_absent() -> None:
    found = ws(status_activity=ago(7200), started=ago(9000), spec=AUTO)
    assert isinstance(idle.active_deadline(found, NOW), idle.AutoSuspend)


def test_a_resumed_workspace_is_not_idle_the_moment_it_runs() -> None:
    # Last activity two days ago, the pod Active for a minute: an hour from its start.
    assert idle.active_deadline(ws(activity=ago(172800), started=ago(60), spec=AUTO), NOW) == 3540


def test_activity_in_the_future_counts_as_now() -> None:
    future = NOW + timedelta(days=365)
    assert idle.active_deadline(ws(activity=future, started=ago(60), spec=AUTO), NOW) == 3600


def test_a_malformed_annotation_is_no_activity() -> None:
    found = ws(started=ago(60), spec=AUTO)
    found["metadata"]["annotations"][idle.LAST_ACTIVITY] = "yesterday"
    assert idle.active_deadline(found, NOW) is None


@pytest.mark.parametrize(
    ("timeout", "started", "expected"),
    [(60, 61, "suspend"), (60, 30, 30.0), (0, 10**6, None), ("60", 61, None)],
)
def test_the_pods_lifetime(timeout: object, started: float, expected: object) -> None:
    due = idle.active_deadline(ws(started=ago(started), spec={"timeout": timeout}), NOW)
    if expected == "suspend":
        assert isinstance(due, idle.AutoSuspend)
        assert (due.reason, due.metric) == (idle.LIFETIME, "timeout")
        assert due.message == "the pod ran for its spec.timeout of 1m"
    else:
        assert due == expected


def test_the_earliest_deadline_wins() -> None:
    found = ws(activity=ago(1800), started=ago(100), spec={**AUTO, "timeout": 600})
    assert idle.active_deadline(found, NOW) == 500


@pytest.mark.parametrize(
    ("ttl", "suspended", "expected"),
    [(60, 30, 30.0), (60, 61, -1.0), (0, 61, None), (None, 61, None), (60, None, None)],
)
def test_the_time_left_for_a_suspended_workspace(
    ttl: int | None, suspended: float | None, expected: float | None
) -> None:
    found: Obj = {"spec": {}, "status": {"phase": "Suspended"}}
    if ttl is not None:
        found["spec"]["ttlSecondsAfterSuspended"] = ttl
    if suspended is not None:
        found["status"]["suspendedAt"] = format_time(ago(suspended))
    assert idle.ttl_left(found, NOW) == expected


# -- against the API ---------------------------------------------------------------------------


async def annotate_activity(agents: Agents, at: datetime) -> None:
    live = await agents.h.kube.patch(
        WORKSPACES,
        "ws1",
        {"metadata": {"annotations": {idle.LAST_ACTIVITY: format_time(at)}}},
        agents.h.namespace,
    )
    await agents.h.synced(agents.h.workspaces, "ws1", live)


async def test_an_idle_workspace_is_suspended_at_its_deadline_and_says_why(
    agents: Agents,
) -> None:
    await agents.active(autoSuspend={"idleTimeoutSeconds": 3600})
    await annotate_activity(agents, agents.clock())
    assert await agents.h.reconcile() == Requeue(3600.0)
    agents.clock.advance(1800)
    await annotate_activity(agents, agents.clock())  # the API saw activity half-way
    assert await agents.h.reconcile() == Requeue(3600.0)
    agents.clock.advance(3601)
    await agents.h.reconcile()
    ws = await agents.h.workspace()
    assert ws["status"]["phase"] == "Suspending"
    assert ws["status"]["reason"] == idle.IDLE
    (event,) = await agents.events(idle.IDLE)
    assert "no activity for 1h" in event["message"]
    assert agents.sample("llmsafespaces_workspace_auto_suspensions_total", reason="idle") == 1
    ws = await reconcile_until(agents.h, "Suspended")
    assert ws["status"]["reason"] == idle.IDLE
    await agents.h.reconcile()
    assert (await agents.h.workspace())["status"]["reason"] == idle.IDLE


async def test_a_workspace_without_recorded_activity_stays_active_with_no_deadline(
    agents: Agents,
) -> None:
    await agents.active()
    agents.clock.advance(86400 * 7)
    assert await agents.h.reconcile() is None
    ws = await agents.h.workspace()
    assert ws["status"]["phase"] == "Active"
    assert ws["spec"]["autoSuspend"] == {"enabled": True, "idleTimeoutSeconds": 86400}


async def test_a_pod_past_its_lifetime_is_suspended(agents: Agents) -> None:
    await agents.active(timeout=60)
    assert await agents.h.reconcile() == Requeue(60.0)
    agents.clock.advance(61)
    await agents.h.reconcile()
    ws = await agents.h.workspace()
    assert (ws["status"]["phase"], ws["status"]["reason"]) == ("Suspending", idle.LIFETIME)
    assert agents.sample("llmsafespaces_workspace_auto_suspensions_total", reason="timeout") == 1


async def test_a_resume_after_an_automatic_suspend_runs_again(agents: Agents) -> None:
    await agents.active(timeout=60)
    agents.clock.advance(61)
    await reconcile_until(agents.h, "Suspended")
    live = await agents.h.kube.patch(
        WORKSPACES, "ws1", {"spec": {"suspend": False}}, agents.h.namespace
    )
    await agents.h.synced(agents.h.workspaces, "ws1", live)
    ws = await reconcile_until(agents.h, "Creating")
    assert "reason" not in ws["status"]


async def test_a_workspace_kept_suspended_past_its_ttl_loses_its_volume_and_stays_terminated(
    agents: Agents,
) -> None:
    await agents.active(ttlSecondsAfterSuspended=60)
    claim = (await agents.h.workspace())["status"]["pvcName"]
    assert await agents.h.kube.get_or_none(PVCS, claim, agents.h.namespace)
    live = await agents.h.kube.patch(
        WORKSPACES, "ws1", {"spec": {"suspend": True}}, agents.h.namespace
    )
    await agents.h.synced(agents.h.workspaces, "ws1", live)
    await reconcile_until(agents.h, "Suspending")
    # Play the kubelet: the pod is gone once its containers stopped.
    await agents.h.kube.delete(PODS, await agents.h.pod_name(), agents.h.namespace, grace_seconds=0)
    await reconcile_until(agents.h, "Suspended")
    agents.clock.advance(61)
    await agents.h.reconcile()
    ws = await agents.h.workspace()
    assert not ws["metadata"].get("deletionTimestamp")
    assert (ws["status"]["phase"], ws["status"]["reason"]) == ("Terminated", idle.TTL_EXPIRED)
    assert "kept as Terminated" in ws["status"]["message"]
    pvc = await agents.h.kube.get_or_none(PVCS, claim, agents.h.namespace)
    assert pvc is None or pvc["metadata"].get("deletionTimestamp")  # pvc-protection may hold it
    (event,) = await agents.events(idle.TTL_EXPIRED)
    assert "ttlSecondsAfterSuspended (60 s)" in event["message"]
    assert agents.sample("llmsafespaces_workspace_ttl_expirations_total") == 1
    # Kept as it is: later passes write nothing, and a resume request does not revive it.
    await agents.h.settle()
    version = (await agents.h.workspace())["metadata"]["resourceVersion"]
    assert await agents.h.reconcile() is None
    assert (await agents.h.workspace())["metadata"]["resourceVersion"] == version
    live = await agents.h.kube.patch(
        WORKSPACES, "ws1", {"spec": {"suspend": False}}, agents.h.namespace
    )
    await agents.h.synced(agents.h.workspaces, "ws1", live)
    await agents.h.reconcile()
    ws = await agents.h.workspace()
    assert (ws["status"]["phase"], ws["status"]["reason"]) == ("Terminated", idle.TTL_EXPIRED)
    assert agents.sample("llmsafespaces_workspace_ttl_expirations_total") == 1


async def test_with_the_delete_action_a_workspace_past_its_ttl_is_deleted(agents: Agents) -> None:
    agents.h.use(
        settings=dataclasses.replace(agents.h.reconciler.deps.settings, ttl_action="delete")
    )
    await agents.h.apply(suspend=True, ttlSecondsAfterSuspended=60)
    await agents.h.reconcile()
    assert (await agents.h.workspace())["status"]["phase"] == "Suspended"
    agents.clock.advance(30)
    assert await agents.h.reconcile() == Requeue(30.0)
    agents.clock.advance(31)
    await agents.h.reconcile()
    ws = await agents.h.workspace()
    assert ws["metadata"].get("deletionTimestamp")
    assert (ws["status"]["phase"], ws["status"]["reason"]) == ("Terminating", idle.TTL_EXPIRED)
    (event,) = await agents.events(idle.TTL_EXPIRED)
    assert "ttlSecondsAfterSuspended (60 s)" in event["message"]
    assert agents.sample("llmsafespaces_workspace_ttl_expirations_total") == 1
    for _ in range(20):
        await agents.h.reconcile()
        if await agents.h.kube.get_or_none(WORKSPACES, "ws1", agents.h.namespace) is None:
            break
    assert await agents.h.kube.get_or_none(WORKSPACES, "ws1", agents.h.namespace) is None
