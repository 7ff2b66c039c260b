"""agentd's health and deep status, read by the fleet's scheduler from a stub agentd on
loopback and written by the Workspace reconciler: when reads happen, what each answer makes
of the Workspace's conditions and fields, the restart after three failed liveness checks,
and that a steady agent costs no reconcile and no write."""

from __future__ import annotations

import pytest

from controller.toolkit.conditions import find_condition
from tests.controller.status_schema import RecordingKube, status_schema, undeclared
from tests.controller.workspace.agents import FIRST_READS, Agents, agents, harness
from tests.controller.workspace.factories import credentials
from tests.support.agentd import busy, healthy_health, healthy_status
from tests.support.waiting import eventually
from wspin.core.kinds import PODS, WORKSPACES
from wspin.core.objects import Obj

__all__ = ["agents", "harness"]


def condition(ws: Obj, type_: str) -> Obj | None:
    return find_condition(ws["status"].get("conditions") or [], type_)


async def test_nothing_is_read_within_the_startup_grace(agents: Agents) -> None:
    agent = await agents.active()
    await agents.advance(29)
    assert agent.seen == []
    await agents.advance(FIRST_READS - 29)
    assert (agent.requests("/v1/healthz"), agent.requests("/v1/statusz")) == (1, 1)


async def test_a_healthy_agent_is_written_once_then_costs_nothing(agents: Agents) -> None:
    agent = await agents.active()
    queued = await agents.advance(FIRST_READS)
    assert len(queued) >= 1
    ws = await agents.h.workspace()
    healthy = condition(ws, "AgentHealthy")
    assert healthy is not None and (healthy["status"], healthy["reason"]) == (
        "True",
        "AgentHealthy",
    )
    assert healthy["message"] == "agentd 1.4.0 is healthy; connected: anthropic"
    ready = condition(ws, "ProviderReady")
    assert ready is not None and (ready["status"], ready["reason"]) == ("True", "ProvidersReady")
    assert condition(ws, "DiskPressure") is None and condition(ws, "MemoryPressure") is None
    assert ws["status"]["diskUsedBytes"] == 2 * 1024**3
    assert ws["status"]["cpuLimitMicrosPerSec"] == 2_000_000
    assert "sessions" not in ws["status"] and "activeSessions" not in ws["status"]
    version = ws["metadata"]["resourceVersion"]

    # Ten minutes of identical answers (uptime and CPU moving on): no reconcile, no write.
    for _ in range(10):
        agent.health = healthy_health(uptime_seconds=agent.health["uptime_seconds"] + 60)
        agent.status = healthy_status(cpu={"usage_micros": 9_000_000, "limit_micros_per_sec": 2})
        agent.status["cpu"]["limit_micros_per_sec"] = 2_000_000
        assert await agents.advance(60) == []
    assert agent.requests("/v1/healthz") >= 10 and agent.requests("/v1/statusz") >= 10
    assert (await agents.h.workspace())["metadata"]["resourceVersion"] == version


async def test_statusz_carries_the_admin_bearer_and_healthz_none(agents: Agents) -> None:
    agent = await agents.active()
    await agents.advance(FIRST_READS)
    token = credentials(await agents.h.workspace()).admin_token
    assert ("/v1/statusz", f"Bearer {token}") in agent.seen
    assert ("/v1/healthz", "") in agent.seen
    # Another token is refused (401), read as a failed deep status: nothing is copied.
    agent.token = "not-the-token"
    agent.status = busy(("s1", 10))
    await agents.advance(60)
    assert "sessions" not in (await agents.h.workspace())["status"]
    assert (
        agents.sample(
            "llmsafespaces_workspace_health_check_failures_total",
            endpoint="statusz",
            outcome="unreadable",
        )
        == 1
    )


async def test_a_missing_provider_degrades_the_agent_and_copies_nothing(agents: Agents) -> None:
    agent = await agents.active()
    agent.status = healthy_status(connected=[], providers_configured=2)
    await agents.advance(FIRST_READS)
    ws = await agents.h.workspace()
    healthy, ready = condition(ws, "AgentHealthy"), condition(ws, "ProviderReady")
    assert healthy is not None and (healthy["status"], healthy["reason"]) == (
        "False",
        "AgentDegraded",
    )
    assert healthy["message"] == "agentd 1.4.0 is up but has no LLM provider connected"
    assert ready is not None and ready["reason"] == "ProvidersNotConnected"
    assert ready["message"] == "no LLM provider is connected (2 configured)"
    agent.status = healthy_status(ready=False)
    await agents.advance(60)
    healthy = condition(await agents.h.workspace(), "AgentHealthy")
    assert healthy is not None and healthy["message"] == "agentd 1.4.0 is up but is not ready"


async def test_disk_and_memory_pressure_come_and_go(agents: Agents) -> None:
    agent = await agents.active()
    agent.status = healthy_status(disk={"used_bytes": 96, "total_bytes": 100})
    await agents.advance(FIRST_READS)
    disk = condition(await agents.h.workspace(), "DiskPressure")
    assert disk is not None and (disk["status"], disk["message"]) == (
        "True",
        "the workspace volume is 96% full",
    )
    agent.status = healthy_status(
        disk={"used_bytes": 50, "total_bytes": 100},
        memory={"used_bytes": 90, "total_bytes": 100},
        memory_pressure=True,
    )
    await agents.advance(60)
    ws = await agents.h.workspace()
    assert condition(ws, "DiskPressure") is None
    memory = condition(ws, "MemoryPressure")
    assert memory is not None
    assert memory["message"] == "agentd reports memory pressure (90% of its limit)"
    agent.status = healthy_status()
    await agents.advance(60)
    assert condition(await agents.h.workspace(), "MemoryPressure") is None


async def test_credentials_waiting_for_busy_sessions_are_reported(agents: Agents) -> None:
    agent = await agents.active()
    agent.health = healthy_health(
        pendingApply={"reason": "relay rotation", "waitingSeconds": 40, "busySessions": ["a"]}
    )
    await agents.advance(FIRST_READS)
    pending = condition(await agents.h.workspace(), "CredentialsApplyPending")
    assert pending is not None and pending["reason"] == "CredentialsApplyDeferred"
    assert pending["message"] == (
        "new credentials wait for 1 busy session(s) to end (relay rotation)"
    )
    # Seconds waiting move on every read: not a reason to write.
    agent.health["pendingApply"]["waitingSeconds"] = 90
    assert await agents.advance(15) == []
    agent.health = healthy_health()
    await agents.advance(15)
    assert condition(await agents.h.workspace(), "CredentialsApplyPending") is None
    agent.health = healthy_health(pendingApply={"reason": "r", "busySessions": 2})
    await agents.advance(15)
    assert condition(await agents.h.workspace(), "CredentialsApplyPending") is not None
    await agents.stub.refuse()  # a failed check removes it too
    await agents.advance(15)
    assert condition(await agents.h.workspace(), "CredentialsApplyPending") is None


async def test_warnings_end_the_healthy_message(agents: Agents) -> None:
    agent = await agents.active()
    agent.health = healthy_health(warnings=["disk 91%", "slow provider"])
    await agents.advance(FIRST_READS)
    healthy = condition(await agents.h.workspace(), "AgentHealthy")
    assert healthy is not None and healthy["status"] == "True"
    assert healthy["message"].endswith("; warnings: disk 91%, slow provider")


async def test_sessions_are_written_when_they_start_or_end_not_as_context_grows(
    agents: Agents,
) -> None:
    agent = await agents.active()
    agent.status = busy(("s1", 1000))
    await agents.advance(FIRST_READS)
    ws = await agents.h.workspace()
    assert ws["status"]["sessions"] == [
        {"id": "s1", "title": "task s1", "status": "busy", "contextUsed": 1000}
    ]
    assert ws["status"]["activeSessions"] == 1
    agent.status = busy(("s1", 5000))
    assert await agents.advance(60) == []
    agent.status = busy(("s1", 6000), ("s2", 10))
    await agents.advance(60)
    ws = await agents.h.workspace()
    assert [s["contextUsed"] for s in ws["status"]["sessions"]] == [6000, 10]
    agent.status = healthy_status()
    await agents.advance(60)
    ws = await agents.h.workspace()
    assert "sessions" not in ws["status"] and "activeSessions" not in ws["status"]


async def test_usage_is_rewritten_only_when_it_moved_by_a_percent(agents: Agents) -> None:
    agent = await agents.active()
    agent.status = healthy_status(disk={"used_bytes": 5000, "total_bytes": 10000})
    await agents.advance(FIRST_READS)
    agent.status = healthy_status(disk={"used_bytes": 5050, "total_bytes": 10000})
    assert await agents.advance(60) == []
    assert (await agents.h.workspace())["status"]["diskUsedBytes"] == 5000
    agent.status = healthy_status(disk={"used_bytes": 5200, "total_bytes": 10000})
    assert await agents.advance(60) != []
    assert (await agents.h.workspace())["status"]["diskUsedBytes"] == 5200


async def test_the_relay_delivery_report_is_mirrored_into_secrets_delivery(
    agents: Agents,
) -> None:
    agent = await agents.active()
    agent.health = healthy_health(
        relay={"appliedRevision": "r0123456789ab", "degradedReason": "token_expired"},
        spawnEnv={"spawnedRev": "7", "degraded": False},
    )
    await agents.advance(FIRST_READS)
    assert (await agents.h.workspace())["status"]["secretsDelivery"] == {
        "relayRevision": "r0123456789ab",
        "degradedReason": "token_expired",
        "spawnedRev": "7",
    }


async def test_user_creds_present_is_mirrored_from_older_agents(agents: Agents) -> None:
    agent = await agents.active()
    agent.health = healthy_health(userCredsPresent=False)
    await agents.advance(FIRST_READS)
    assert (await agents.h.workspace())["status"]["userCredsPresent"] is False
    agent.health = healthy_health(healthy=False)
    await agents.advance(15)
    assert "userCredsPresent" not in (await agents.h.workspace())["status"]


async def assert_restarted(agents: Agents, pod_uid: str | None) -> None:
    ws = await agents.h.workspace()
    status = ws["status"]
    assert status["phase"] == "Creating"
    assert (status["restartCount"], status["controllerRestartCount"]) == (1, 1)
    assert "consecutiveHealthFailures" not in status and "userCredsPresent" not in status
    assert condition(ws, "AgentHealthy") is None
    ready = condition(ws, "Ready")
    assert ready is not None and "agentd failed 3 health checks in a row" in ready["message"]
    assert await agents.pod_uid() != pod_uid or (
        await agents.h.kube.get(PODS, await agents.h.pod_name(), agents.h.namespace)
    )["metadata"].get("deletionTimestamp")
    (event,) = await agents.events("AgentRestarted")
    assert event["type"] == "Warning"
    assert agents.sample("llmsafespaces_workspace_controller_restarts_total") == 1


@pytest.mark.parametrize("failure", ["refused", "unhealthy", "http 503", "hanging"])
async def test_an_agent_failing_three_checks_in_a_row_is_restarted(
    agents: Agents, failure: str
) -> None:
    agent, pod_uid = await agents.read_once()
    if failure == "refused":
        await agents.stub.refuse()
    elif failure == "unhealthy":
        agent.health = healthy_health(healthy=False, warnings=["provider loop stuck"])
    elif failure == "http 503":
        agent.health_raw, agent.health_code = b"overloaded", 503
    else:
        agent.hang = True
    expected = {
        "refused": ("Unknown", "HealthCheckFailed", "connection failed"),
        "unhealthy": ("False", "AgentUnhealthy", "warnings: provider loop stuck"),
        "http 503": ("False", "AgentUnhealthy", "healthz answered HTTP 503"),
        "hanging": ("Unknown", "HealthCheckFailed", "no answer within 0.5 s"),
    }[failure]
    for count in (1, 2):
        await agents.advance(15)
        ws = await agents.h.workspace()
        assert ws["status"]["consecutiveHealthFailures"] == count
        healthy = condition(ws, "AgentHealthy")
        assert healthy is not None
        assert (healthy["status"], healthy["reason"]) == expected[:2]
        assert expected[2] in healthy["message"]
        assert f"{count} time(s) in a row" in healthy["message"]
        assert await agents.pod_uid() == pod_uid
    await agents.advance(15)
    await assert_restarted(agents, pod_uid)


async def test_one_good_check_between_failures_starts_the_count_again(agents: Agents) -> None:
    agent = await agents.active()
    await agents.advance(FIRST_READS)
    for healthy in (False, False, True, False, False):
        agent.health = healthy_health(healthy=healthy)
        await agents.advance(15)
    ws = await agents.h.workspace()
    assert ws["status"]["phase"] == "Active" and ws["status"]["consecutiveHealthFailures"] == 2


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (b"<html>agentd</html>", "healthz answer is not JSON"),
        (b"[1, 2]", "healthz answer is not a JSON object"),
        (b'{"status": "fine"}', "healthz answer has no boolean 'healthy'"),
        (b"x" * (65 * 1024), "healthz answer exceeds 65536 bytes"),
    ],
)
async def test_an_unreadable_report_is_shown_and_counted_but_never_restarts(
    agents: Agents, raw: bytes, detail: str
) -> None:
    agent = await agents.active()
    agent.health_raw = raw
    await agents.advance(FIRST_READS)
    pod_uid = await agents.pod_uid()
    for _ in range(5):
        await agents.advance(15)
    ws = await agents.h.workspace()
    assert ws["status"]["phase"] == "Active" and await agents.pod_uid() == pod_uid
    assert "consecutiveHealthFailures" not in ws["status"]
    healthy = condition(ws, "AgentHealthy")
    assert healthy is not None
    assert (healthy["status"], healthy["reason"]) == ("Unknown", "HealthReportUnreadable")
    assert healthy["message"].startswith(detail)
    assert (
        agents.sample(
            "llmsafespaces_workspace_health_check_failures_total",
            endpoint="healthz",
            outcome="unreadable",
        )
        == 6
    )
    assert agents.sample("llmsafespaces_workspace_controller_restarts_total") == 0


async def test_a_restarted_controller_continues_the_recorded_failure_count(agents: Agents) -> None:
    agent = await agents.active()
    await agents.advance(FIRST_READS)
    agent.health = healthy_health(healthy=False)
    for _ in range(2):
        await agents.advance(15)
    pod_uid = await agents.pod_uid()
    # A new leader: nothing in memory, the status says 2.
    scheduler = agents.scheduler
    scheduler.forget(await agents.h.workspace())
    await agents.h.reconcile()
    view = scheduler.view(await agents.h.workspace())
    assert view is not None and view.failures == 2
    await agents.advance(60)  # past the (shorter) grace of a pod that is Active already
    await assert_restarted(agents, pod_uid)


async def test_active_time_and_usage_are_metered_by_the_clock_not_by_passes(
    agents: Agents,
) -> None:
    agent = await agents.active(owner={"userID": "alice"})
    tracked = agents.waker.now()
    await agents.advance(FIRST_READS)
    for _ in range(4):
        await agents.advance(15)
    workspace = {
        "workspace_namespace": agents.h.namespace,
        "workspace_id": "ws1",
        "user_id": "alice",
    }
    levels = {"runtime": "python", "security_level": "none"}
    metered = agents.sample("llmsafespaces_workspace_active_seconds_total", **workspace, **levels)
    elapsed = agents.waker.now() - tracked
    assert elapsed - 15 < metered <= elapsed
    assert agents.sample("llmsafespaces_user_active_seconds_total", user_id="alice", **levels) == (
        metered
    )
    # Disk and memory held over the time since the deep status first reported them.
    disk = agents.sample("llmsafespaces_workspace_disk_used_bytes_seconds_total", **workspace)
    assert 0 < disk <= 2 * 1024**3 * (elapsed - 30)
    assert disk % (2 * 1024**3) == 0
    assert agents.sample("llmsafespaces_user_disk_bytes_seconds_total", user_id="alice") == disk
    memory = agents.sample("llmsafespaces_workspace_memory_used_bytes_seconds_total", **workspace)
    assert memory == disk / 8  # 256 MiB against 2 GiB, over the same seconds
    # CPU: agentd's counter as first read (the pod is new), then its growth.
    assert agents.sample("llmsafespaces_workspace_cpu_milliseconds_total", **workspace) == 1_500
    agent.status = healthy_status(cpu={"usage_micros": 4_000_000, "limit_micros_per_sec": 2})
    await agents.advance(60)
    assert agents.sample("llmsafespaces_user_cpu_milliseconds_total", user_id="alice") == 4_000
    metered = agents.sample("llmsafespaces_workspace_active_seconds_total", **workspace, **levels)
    for _ in range(10):  # reconciles add nothing
        await agents.h.reconcile()
    assert (
        agents.sample("llmsafespaces_workspace_active_seconds_total", **workspace, **levels)
        == metered
    )


async def test_a_deleted_workspace_takes_its_metering_series_with_it(agents: Agents) -> None:
    await agents.active(owner={"userID": "alice"})
    await agents.advance(FIRST_READS)
    workspace = {"workspace_namespace": agents.h.namespace, "workspace_id": "ws1"}
    assert agents.sample(
        "llmsafespaces_workspace_cpu_milliseconds_total", **workspace, user_id="alice"
    )
    pod = await agents.h.pod_name()
    await agents.h.kube.delete(PODS, pod, agents.h.namespace, grace_seconds=0)
    await agents.h.kube.delete(WORKSPACES, "ws1", agents.h.namespace)
    await agents.h.settle()
    await agents.h.reconcile()

    def gone() -> bool:
        return agents.h.workspaces.get(agents.h.key()) is None

    await eventually(gone, "the Workspace to leave the cache")
    names = {metric.name for metric in agents.registry.collect() if metric.samples}
    assert not {
        n for n in names if n.startswith(("llmsafespaces_user_", "llmsafespaces_workspace_cpu_m"))
    }
    for metric in agents.registry.collect():
        for sample in metric.samples:
            assert sample.labels.get("workspace_id") != "ws1", sample


async def test_every_agent_status_field_written_is_declared_in_the_crd(agents: Agents) -> None:
    recording = RecordingKube(agents.h.kube)
    agents.h.use(kube=recording)
    agent = await agents.active()
    agent.health = healthy_health(
        userCredsPresent=True,
        pendingApply={"reason": "r", "busySessions": 1},
        relay={"appliedRevision": "r1", "degradedReason": ""},
        spawnEnv={"spawnedRev": "3"},
    )
    agent.status = busy(("s1", 10))
    agent.status.update(disk={"used_bytes": 99, "total_bytes": 100}, memory_pressure=True)
    await agents.advance(FIRST_READS)
    agent.health = healthy_health(healthy=False)
    for _ in range(3):
        await agents.advance(15)
    written = {key for s in recording.statuses for key, value in s.items() if value is not None}
    assert {
        "sessions",
        "activeSessions",
        "userCredsPresent",
        "consecutiveHealthFailures",
        "controllerRestartCount",
        "diskUsedBytes",
        "cpuUsageMicros",
        "contextTotal",
        "secretsDelivery",
    } <= written
    schema = status_schema()
    gaps = sorted({p for s in recording.statuses for p in undeclared(s, schema, "status")})
    assert gaps == [], f"status fields written but not declared in the CRD: {gaps}"
