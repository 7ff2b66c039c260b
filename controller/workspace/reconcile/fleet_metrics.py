"""The Workspace fleet as gauges, computed at scrape time from the controller's Workspace cache.

- ``llmsafespaces_workspaces{phase}``: Workspaces per phase (every phase, 0 included);
- ``llmsafespaces_workspaces_running{runtime,security_level}``: Active Workspaces (the name
  and labels LLMSafeSpaces dashboards use; here counted, never incremented, so it cannot
  drift);
- ``llmsafespaces_workspace_conditions{condition,status,reason}``: Workspaces per condition.

The counting is ``wspin.core.fleet``'s, the same ``wspin status`` prints. Label values come from
bounded sets (see that module), never from a Workspace's name or owner, so the number of series
does not grow with the fleet. Every replica reports them from its own cache (a new leader starts
warm): aggregate with ``max`` over replicas, never ``sum``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from controller.types import Listable
from wspin.core import fleet

PHASES_METRIC = "llmsafespaces_workspaces"
RUNNING_METRIC = "llmsafespaces_workspaces_running"
CONDITIONS_METRIC = "llmsafespaces_workspace_conditions"
_REPLICAS = " Reported by every controller replica from its cache: aggregate with max."


class WorkspaceFleetCollector(Collector):
    """Workspaces by phase, running Workspaces and Workspace conditions, from the cache."""

    def __init__(self, workspaces: Listable) -> None:
        self.workspaces = workspaces

    def describe(self) -> list[GaugeMetricFamily]:
        return list(self._families())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        phases, running, conditions = self._families()
        workspaces = self.workspaces.list()
        for phase, count in fleet.phase_counts(workspaces).items():
            phases.add_metric([phase], count)
        for (runtime, level), count in sorted(fleet.running_counts(workspaces).items()):
            running.add_metric([runtime, level], count)
        for labels, count in sorted(fleet.condition_counts(workspaces).items()):
            conditions.add_metric(list(labels), count)
        yield from (phases, running, conditions)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                PHASES_METRIC,
                "Workspaces by status.phase (Pending before the controller wrote one, Unknown "
                "outside the CRD's enum); one series per phase." + _REPLICAS,
                labels=["phase"],
            ),
            GaugeMetricFamily(
                RUNNING_METRIC,
                "Active Workspaces by runtime (the RuntimeEnvironment name; image for an image "
                "reference) and security_level (standard, high, custom or none)." + _REPLICAS,
                labels=["runtime", "security_level"],
            ),
            GaugeMetricFamily(
                CONDITIONS_METRIC,
                "Workspaces by condition type, status and reason (at most 16 reasons per "
                "condition and status; the rest are Other)." + _REPLICAS,
                labels=["condition", "status", "reason"],
            ),
        )
