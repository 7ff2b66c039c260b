"""The Workspace fleet gauges on /metrics: what the cache holds, through Prometheus's parser."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.workspace.reconcile.fleet_metrics import WorkspaceFleetCollector


class Cached:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def list(self) -> list[dict[str, Any]]:
        return self.items


def scrape(items: list[dict[str, Any]]) -> dict[str, dict[tuple[str, ...], float]]:
    registry = CollectorRegistry()
    registry.register(WorkspaceFleetCollector(Cached(items)))
    found: dict[str, dict[tuple[str, ...], float]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        assert family.type == "gauge"
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sample.labels.values())] = sample.value
    return found


def ws(phase: str, runtime: str = "python", **status: Any) -> dict[str, Any]:
    return {"spec": {"runtime": runtime}, "status": {"phase": phase, **status}}


def test_an_empty_cache_reports_every_phase_at_zero() -> None:
    found = scrape([])
    assert found["llmsafespaces_workspaces"] == {
        (phase,): 0.0
        for phase in (
            "Pending",
            "Creating",
            "Active",
            "Suspending",
            "Suspended",
            "Resuming",
            "Terminating",
            "Terminated",
            "Failed",
        )
    }
    assert "llmsafespaces_workspaces_running" not in found


def test_the_gauges_follow_the_cache_at_each_scrape() -> None:
    items = [ws("Active"), ws("Active", "node"), ws("Creating")]
    items[0]["status"]["conditions"] = [
        {"type": "AgentdVerified", "status": "False", "reason": "AgentdVerificationFailed"}
    ]
    cache = Cached(items)
    registry = CollectorRegistry()
    registry.register(WorkspaceFleetCollector(cache))
    first = generate_latest(registry).decode()
    assert 'llmsafespaces_workspaces{phase="Active"} 2.0' in first
    assert 'llmsafespaces_workspaces_running{runtime="node",security_level="none"} 1.0' in first
    assert (
        'llmsafespaces_workspace_conditions{condition="AgentdVerified",reason='
        '"AgentdVerificationFailed",status="False"} 1.0'
    ) in first
    cache.items = [ws("Suspended")]
    second = generate_latest(registry).decode()
    assert 'llmsafespaces_workspaces{phase="Active"} 0.0' in second
    assert 'llmsafespaces_workspaces{phase="Suspended"} 1.0' in second
    assert "llmsafespaces_workspaces_running{" not in second
    assert "llmsafespaces_workspace_conditions{" not in second


def test_the_help_text_tells_how_to_aggregate_and_bounds_the_labels() -> None:
    text = generate_latest(_registry()).decode()
    helps = [line for line in text.splitlines() if line.startswith("# HELP")]
    assert len(helps) == 3
    assert all("aggregate with max" in line for line in helps)


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(WorkspaceFleetCollector(Cached([])))
    return registry
