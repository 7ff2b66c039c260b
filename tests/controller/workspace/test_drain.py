"""Session drain before the recycles the controller starts, on a fake clock against a stub
agentd: proceed when no session is busy or agentd cannot be asked, hold while sessions make
progress, force after the stall bound; the force-recycle annotation acted on once; suspends
never drain."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from controller.types import ObjectKey
from controller.workspace.agent import drain
from controller.workspace.agent.answers import Session, Status
from controller.workspace.agent.view import AgentView
from tests.controller.workspace.agents import FIRST_READS, Agents, agents, harness
from tests.kubeapi import KubeServer
from tests.support.agentd import busy, healthy_status
from wspin.core.kinds import WORKSPACES
from wspin.core.objects import Obj

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
HOUR = 3600.0

__all__ = ["agents", "harness"]


# -- the verdict (pure) ------------------------------------------------------------------------


def status(*busy_sessions: tuple[str, int]) -> Status:
    sessions = tuple(Session(i, "", "busy", used) for i, used in busy_sessions)
    return Status(healthy=True, ready=True, sessions=sessions, sessions_active=len(sessions))


WINDOW = drain.Window("10.0.0.7", T0, epoch=3, progress_at=T0, busy_changes=0)


def test_no_read_since_the_drain_began_holds_without_a_word() -> None:
    verdict, _ = drain.decide(WINDOW, AgentView(status=status(), status_epoch=2), T0, HOUR)
    assert verdict == drain.Hold(drain.FIRST_READ_WAIT)


@pytest.mark.parametrize(
    ("view", "expected"),
    [
        (AgentView(status=status(), status_epoch=3), drain.Proceed("idle")),
        (
            AgentView(status_problem="connection failed: refused", status_epoch=3),
            drain.Proceed("failed_open", "connection failed: refused"),
        ),
        (
            AgentView(status=status(("s", 1)), status_problem="agentd unhealthy", status_epoch=3),
            drain.Proceed("failed_open", "agentd unhealthy"),
        ),
    ],
)
def test_idle_and_unreachable_agents_never_hold_a_recycle(
    view: AgentView, expected: drain.Proceed
) -> None:
    assert drain.decide(WINDOW, view, T0 + timedelta(seconds=5), HOUR)[0] == expected


def test_progress_restarts_the_stall_clock_and_a_stall_forces() -> None:
    window = WINDOW
    view = AgentView(status=status(("s1", 10)), status_epoch=3)
    verdict, window = drain.decide(window, view, T0, HOUR)
    assert verdict == drain.Hold(HOUR, busy=1, announce=True)
    # Two hours of changes (each look sees the counter moved): never forced.
    for step in range(1, 5):
        view = replace(view, busy_changes=step)
        now = T0 + timedelta(minutes=30 * step)
        verdict, window = drain.decide(window, view, now, HOUR)
        assert verdict == drain.Hold(HOUR, busy=1)
    # Then frozen: held for the rest of the hour, forced at the hour.
    now += timedelta(minutes=59)
    verdict, window = drain.decide(window, view, now, HOUR)
    assert verdict == drain.Hold(60.0, busy=1)
    verdict, window = drain.decide(window, view, now + timedelta(minutes=1), HOUR)
    assert verdict == drain.Proceed("forced", "no progress for 3600 s")


def test_a_report_that_keeps_changing_holds_a_recycle_for_four_stall_bounds_at_most() -> None:
    window = WINDOW
    view = AgentView(status=status(("s1", 10)), status_epoch=3)
    now = T0
    for step in range(1, 24):  # every 10 minutes the report changes
        now = T0 + timedelta(minutes=10 * step)
        view = replace(view, busy_changes=step)
        verdict, window = drain.decide(window, view, now, HOUR)
        assert isinstance(verdict, drain.Hold)
        assert verdict.after <= 4 * HOUR - 600 * step
    verdict, _ = drain.decide(window, replace(view, busy_changes=99), T0 + timedelta(hours=4), HOUR)
    assert verdict == drain.Proceed("forced", "draining for 14400 s, the longest a drain may take")


def test_drain_windows_are_per_uid_and_pinned_to_the_pod_ip() -> None:
    windows = drain.DrainWindows()
    ws = {"metadata": {"namespace": "ns", "name": "w", "uid": "u1"}}
    windows.put(ws, WINDOW, stall_bound=HOUR)
    assert windows.get(ws, "10.0.0.7") == WINDOW
    recreated = {"metadata": {"namespace": "ns", "name": "w", "uid": "u2"}}
    assert windows.get(recreated, "10.0.0.7") is None
    assert windows.get(ws, "10.0.0.8") is None  # another pod: a fresh drain
    assert windows.get(ws, "10.0.0.7") is None and len(windows) == 0


def test_old_windows_are_forgotten_once_they_cannot_matter() -> None:
    windows = drain.DrainWindows()
    gone = {"metadata": {"namespace": "ns", "uid": "gone"}}
    windows.put(gone, WINDOW, stall_bound=HOUR)
    later = replace(WINDOW, started=T0 + timedelta(hours=3))
    windows.put({"metadata": {"namespace": "ns", "uid": "new"}}, later, stall_bound=HOUR)
    assert len(windows) == 1


@pytest.mark.parametrize(
    ("marker", "generation", "forced", "spent"),
    [("7", 7, True, "7"), ("7", 8, False, "7"), ("9", 8, False, None), ("x", 8, False, None)],
)
def test_the_force_marker_acts_only_on_the_generation_it_names(
    marker: str, generation: int, forced: bool, spent: str | None
) -> None:
    ws = {
        "metadata": {"annotations": {drain.FORCE_RECYCLE: marker}},
        "spec": {"restartGeneration": generation},
    }
    assert drain.user_forced(ws) is forced
    assert drain.spent_marker(ws, generation) == spent


# -- against the API and a stub agentd ----------------------------------------------------------


async def bump(agents: Agents, generation: int = 1, **annotations: str) -> None:
    body: Obj = {"spec": {"restartGeneration": generation}}
    if annotations:
        body["metadata"] = {"annotations": annotations}
    live = await agents.h.kube.patch(WORKSPACES, "ws1", body, agents.h.namespace)
    await agents.h.synced(agents.h.workspaces, "ws1", live)


async def held(agents: Agents, pod_uid: str | None) -> Obj:
    ws = await agents.h.workspace()
    assert ws["status"]["phase"] == "Active"
    assert ws["status"]["observedRestartGeneration"] == 0
    assert await agents.pod_uid() == pod_uid
    return ws


async def recycled(agents: Agents, pod_uid: str | None, generation: int = 1) -> Obj:
    ws = await agents.h.workspace()
    assert ws["status"]["phase"] == "Creating"
    assert ws["status"]["observedRestartGeneration"] == generation
    deleted = await agents.h.kubelet_stops()  # gone already, or marked for deletion
    assert deleted is None or deleted["metadata"].get("deletionTimestamp")
    assert await agents.pod_uid() != pod_uid
    return ws


def drained(agents: Agents, counter: str, reason: str = "restart_generation") -> float:
    return agents.sample(f"llmsafespaces_workspace_drain_{counter}_total", reason=reason)


async def test_a_bump_with_no_busy_session_recycles_at_the_first_read(agents: Agents) -> None:
    _, pod_uid = await agents.read_once()
    await bump(agents)
    await agents.h.reconcile()  # the drain begins: agentd is asked now
    await held(agents, pod_uid)
    assert await agents.advance(0) == [ObjectKey(agents.h.namespace, "ws1")]
    ws = await recycled(agents, pod_uid)
    assert ws["status"]["restartCount"] == 1
    assert await agents.events(drain.DEFERRED) == []
    assert drained(agents, "deferred") == 0
    assert (
        agents.sample(
            "llmsafespaces_workspace_drain_duration_seconds_count",
            reason="restart_generation",
            outcome="idle",
        )
        == 1
    )


async def test_busy_sessions_hold_the_recycle_announced_once_until_they_end(
    agents: Agents,
) -> None:
    agent, pod_uid = await agents.read_once()
    agent.status = busy(("s1", 100))
    await bump(agents)
    await agents.h.reconcile()
    await agents.advance(0)
    await held(agents, pod_uid)
    for _ in range(5):  # the same busy session on every read (every 10 s while draining)
        assert await agents.advance(10) == []  # nothing new: no reconcile
        await held(agents, pod_uid)
    assert agents.stub.agents["127.0.0.1"].requests("/v1/statusz") >= 6
    (event,) = await agents.events(drain.DEFERRED)
    assert event["type"] == "Normal"
    assert "waits for 1 busy agent session(s)" in event["message"]
    assert drained(agents, "deferred") == 1
    agent.status = healthy_status()
    await agents.advance(10)
    await recycled(agents, pod_uid)
    assert drained(agents, "forced") == 0


async def test_progress_keeps_the_hold_and_a_stall_forces_the_recycle(agents: Agents) -> None:
    agent, pod_uid = await agents.read_once()
    agent.status = busy(("s1", 100))
    await bump(agents)
    await agents.h.reconcile()
    await agents.advance(0)
    for step in range(1, 5):  # two hours, the context growing between reads
        agent.status = busy(("s1", 100 + step))
        await agents.advance(HOUR / 2)
        await held(agents, pod_uid)
    await agents.advance(HOUR / 2)  # frozen for half an hour: still held
    await held(agents, pod_uid)
    # Unchanged reads queue nothing: the hold's own deadline is when to look again.
    due = await agents.h.reconcile()
    assert due is not None and due.after == pytest.approx(HOUR / 2)
    assert await agents.advance(HOUR / 2) == []
    await agents.h.reconcile()  # the deadline the queue keeps
    await recycled(agents, pod_uid)
    (event,) = await agents.events(drain.FORCED)
    assert event["type"] == "Warning" and "no progress for 3600 s" in event["message"]
    assert drained(agents, "forced") == 1


@pytest.mark.parametrize("failure", ["refused", "unhealthy", "hanging"])
async def test_an_agent_that_cannot_be_asked_fails_open(agents: Agents, failure: str) -> None:
    agent, pod_uid = await agents.read_once()
    if failure == "refused":
        await agents.stub.refuse()
    elif failure == "unhealthy":
        agent.status = busy(("s1", 1))
        agent.status["healthy"] = False
    else:
        agent.hang = True
    await bump(agents)
    await agents.h.reconcile()
    await agents.advance(0)
    await recycled(agents, pod_uid)
    (event,) = await agents.events(drain.FAILED_OPEN)
    assert event["type"] == "Normal" and "without a drain" in event["message"]
    assert drained(agents, "failed_open") == 1


async def test_an_architecture_change_drains_too(agents: Agents) -> None:
    agent = await agents.active()
    await agents.advance(FIRST_READS)
    agent.status = busy(("s1", 1))
    live = await agents.h.kube.patch(
        WORKSPACES, "ws1", {"spec": {"architecture": "arm64"}}, agents.h.namespace
    )
    await agents.h.synced(agents.h.workspaces, "ws1", live)
    await agents.h.reconcile()
    await agents.advance(0)
    assert drained(agents, "deferred", "architecture_drift") == 1


async def test_the_users_force_marker_recycles_at_once_and_is_removed(agents: Agents) -> None:
    agent, pod_uid = await agents.read_once()
    agent.status = busy(("s1", 1))
    reads = agent.requests("/v1/statusz")
    await bump(agents, 1, **{drain.FORCE_RECYCLE: "1"})
    await agents.h.reconcile()
    ws = await recycled(agents, pod_uid)
    assert drain.FORCE_RECYCLE not in (ws["metadata"].get("annotations") or {})
    assert agent.requests("/v1/statusz") == reads
    (event,) = await agents.events(drain.USER_FORCED)
    assert "restartGeneration 1" in event["message"]
    assert drained(agents, "forced", "restart_generation_user_forced") == 1
    for _ in range(2):
        await agents.h.reconcile()
    assert len(await agents.events(drain.USER_FORCED)) == 1


async def test_a_marker_for_another_generation_drains_and_is_removed_once_spent(
    agents: Agents,
) -> None:
    agent, pod_uid = await agents.read_once()
    agent.status = busy(("s1", 1))
    await bump(agents, 2, **{drain.FORCE_RECYCLE: "1"})
    await agents.h.reconcile()
    await agents.advance(0)
    ws = await held(agents, pod_uid)
    assert ws["metadata"]["annotations"][drain.FORCE_RECYCLE] == "1"
    agent.status = healthy_status()
    await agents.advance(10)
    ws = await recycled(agents, pod_uid, generation=2)
    assert drain.FORCE_RECYCLE not in (ws["metadata"].get("annotations") or {})


async def test_a_marker_that_cannot_be_removed_keeps_the_pod_and_the_marker(
    agents: Agents, kube_server: KubeServer
) -> None:
    _, pod_uid = await agents.read_once()
    await bump(agents, 1, **{drain.FORCE_RECYCLE: "1"})
    path = f"/apis/llmsafespaces.dev/v1/namespaces/{agents.h.namespace}/workspaces/ws1"
    kube_server.fail_next(500, method="PATCH", path=path, exact=True)
    result = await agents.h.reconcile()
    assert result is not None and result.after < 1
    ws = await held(agents, pod_uid)
    assert ws["metadata"]["annotations"][drain.FORCE_RECYCLE] == "1"
    await agents.h.reconcile()
    await recycled(agents, pod_uid)


async def test_a_bump_of_a_pod_that_does_not_serve_clears_the_marker_without_a_drain(
    agents: Agents,
) -> None:
    await agents.h.apply()
    await agents.inject()
    await agents.h.reconcile()  # Pending: the pod never served
    await bump(agents, 1, **{drain.FORCE_RECYCLE: "1"})
    await agents.h.reconcile()
    ws = await agents.h.workspace()
    assert ws["status"]["observedRestartGeneration"] == 1
    assert drain.FORCE_RECYCLE not in (ws["metadata"].get("annotations") or {})
    assert await agents.events(drain.USER_FORCED) == []


async def test_a_suspend_never_drains(agents: Agents) -> None:
    agent = await agents.active()
    await agents.advance(FIRST_READS)
    agent.status = busy(("s1", 1))
    reads = agent.requests("/v1/statusz")
    live = await agents.h.kube.patch(
        WORKSPACES, "ws1", {"spec": {"suspend": True}}, agents.h.namespace
    )
    await agents.h.synced(agents.h.workspaces, "ws1", live)
    await agents.h.reconcile()
    assert (await agents.h.workspace())["status"]["phase"] == "Suspending"
    await agents.advance(10)
    assert agent.requests("/v1/statusz") == reads
    assert await agents.events(drain.DEFERRED) == []
