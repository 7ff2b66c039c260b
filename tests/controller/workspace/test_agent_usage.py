"""Per-Workspace and per-user usage, computed at scrape time from the agents read now: series
exist only while their Workspace (or a Workspace of their user) is read, so nothing grows
with the fleet's churn or with owner ids a tenant writes."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.types import ObjectKey
from controller.workspace.agent.answers import Status, Usage
from controller.workspace.agent.usage import AgentUsageCollector
from controller.workspace.agent.view import AgentView

GiB = 1024**3


def status(disk: int, memory: int, cpu_micros: int, busy: int = 0) -> Status:
    return Status(
        healthy=True,
        ready=True,
        sessions_active=busy,
        disk=Usage(disk, 10 * GiB),
        memory=Usage(memory, 2 * GiB),
        cpu_usage_micros=cpu_micros,
    )


def samples(
    targets: list[tuple[ObjectKey, str, AgentView]],
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(AgentUsageCollector(lambda: targets))
    found = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_usage_per_workspace_and_per_user_while_read() -> None:
    targets = [
        (
            ObjectKey("team-a", "ws1"),
            "alice",
            AgentView(status=status(GiB, GiB // 2, 3_000_000, 2)),
        ),
        (ObjectKey("team-a", "ws2"), "alice", AgentView(status=status(2 * GiB, GiB, 0))),
        (ObjectKey("team-b", "ws1"), "bob", AgentView()),  # not read yet
    ]
    found = samples(targets)
    ws1 = (("user_id", "alice"), ("workspace", "ws1"), ("workspace_namespace", "team-a"))
    assert found[("llmsafespaces_workspace_disk_used_bytes", ws1)] == GiB
    assert found[("llmsafespaces_workspace_disk_total_bytes", ws1)] == 10 * GiB
    assert found[("llmsafespaces_workspace_memory_used_bytes", ws1)] == GiB // 2
    assert found[("llmsafespaces_workspace_cpu_seconds_total", ws1)] == 3.0
    assert found[("llmsafespaces_workspace_active_sessions", ws1)] == 2
    assert found[("llmsafespaces_user_active_workspaces", (("user_id", "alice"),))] == 2
    assert found[("llmsafespaces_user_active_workspaces", (("user_id", "bob"),))] == 1
    assert found[("llmsafespaces_user_disk_used_bytes", (("user_id", "alice"),))] == 3 * GiB
    assert found[("llmsafespaces_user_memory_used_bytes", (("user_id", "alice"),))] == 1.5 * GiB


def test_series_go_with_their_workspace() -> None:
    assert not [name for name, _ in samples([])]
    once = samples([(ObjectKey("a", f"ws{i}"), f"u{i}", AgentView()) for i in range(1000)])
    assert len([n for n, _ in once if n == "llmsafespaces_user_active_workspaces"]) == 1000
    assert not [name for name, _ in samples([])]
