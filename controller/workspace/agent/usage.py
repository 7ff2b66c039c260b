"""What Active workspaces use, as gauges computed at scrape time from the agent scheduler's
latest deep status reads.

Per Workspace (labels ``workspace_namespace``, ``workspace``, ``user_id`` = the owner
admission recorded, ``fleet.owner_user_id``; not ``namespace``, which Prometheus sets to the
controller's own):

- ``llmsafespaces_workspace_disk_used_bytes`` / ``…_disk_total_bytes``: the workspace volume;
- ``llmsafespaces_workspace_memory_used_bytes`` / ``…_memory_total_bytes``: the pod's memory
  and its limit;
- ``llmsafespaces_workspace_cpu_seconds_total``: CPU time of the pod's agent and children
  (agentd's cumulative counter; a new pod starts again from 0, which ``rate`` reads as a
  reset);
- ``llmsafespaces_workspace_active_sessions``: busy agent sessions.

Per user (label ``user_id``), summed over that user's Active Workspaces:
``llmsafespaces_user_active_workspaces``, ``llmsafespaces_user_disk_used_bytes``,
``llmsafespaces_user_memory_used_bytes``.

Bounded: a series exists only while its Workspace (or a Workspace of its user) is Active and
read, and disappears with it; nothing is accumulated per Workspace or per user in this
process, so neither the fleet's churn nor owner ids a tenant writes can grow the series
without end. Usage over time (byte-seconds, CPU seconds per user) is PromQL's to compute, e.g.
``sum by (user_id) (rate(llmsafespaces_workspace_cpu_seconds_total[5m]))``. Only the leader
reads agents, so only its metrics carry these series.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from controller.types import ObjectKey
from controller.workspace.agent.view import AgentView

Targets = Callable[[], list[tuple[ObjectKey, str, AgentView]]]
_LABELS = ["workspace_namespace", "workspace", "user_id"]


class AgentUsageCollector(Collector):
    """The gauges above, from ``targets`` (``AgentScheduler.targets``)."""

    def __init__(self, targets: Targets) -> None:
        self.targets = targets

    def describe(self) -> list[GaugeMetricFamily | CounterMetricFamily]:
        return list(self._families().values())

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        families = self._families()
        per_user: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        for key, owner, view in self.targets():
            labels = [key.namespace, key.name, owner]
            totals = per_user[owner]
            totals[0] += 1
            status = view.status
            if status is None:
                continue
            families["sessions"].add_metric(labels, status.sessions_active)
            if status.disk is not None:
                families["disk_used"].add_metric(labels, status.disk.used)
                families["disk_total"].add_metric(labels, status.disk.total)
                totals[1] += status.disk.used
            if status.memory is not None:
                families["memory_used"].add_metric(labels, status.memory.used)
                families["memory_total"].add_metric(labels, status.memory.total)
                totals[2] += status.memory.used
            if status.cpu_usage_micros is not None:
                families["cpu"].add_metric(labels, status.cpu_usage_micros / 1e6)
        for owner, (count, disk, memory) in sorted(per_user.items()):
            families["user_workspaces"].add_metric([owner], count)
            families["user_disk"].add_metric([owner], disk)
            families["user_memory"].add_metric([owner], memory)
        yield from families.values()

    @staticmethod
    def _families() -> dict[str, GaugeMetricFamily | CounterMetricFamily]:
        per_workspace = " Per Active Workspace; gone with it."
        per_user = " Per user with an Active Workspace; gone with the last one."

        def gauge(name: str, text: str, labels: list[str]) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, text, labels=labels)

        return {
            "disk_used": gauge(
                "llmsafespaces_workspace_disk_used_bytes",
                "Bytes used on the workspace volume, as agentd reports." + per_workspace,
                _LABELS,
            ),
            "disk_total": gauge(
                "llmsafespaces_workspace_disk_total_bytes",
                "Size of the workspace volume in bytes, as agentd reports." + per_workspace,
                _LABELS,
            ),
            "memory_used": gauge(
                "llmsafespaces_workspace_memory_used_bytes",
                "Memory the workspace pod uses, in bytes." + per_workspace,
                _LABELS,
            ),
            "memory_total": gauge(
                "llmsafespaces_workspace_memory_total_bytes",
                "Memory limit of the workspace pod, in bytes." + per_workspace,
                _LABELS,
            ),
            "cpu": CounterMetricFamily(
                "llmsafespaces_workspace_cpu_seconds",
                "CPU seconds the workspace pod used since it started (from 0 again with a new "
                "pod)." + per_workspace,
                labels=_LABELS,
            ),
            "sessions": gauge(
                "llmsafespaces_workspace_active_sessions",
                "Busy agent sessions." + per_workspace,
                _LABELS,
            ),
            "user_workspaces": gauge(
                "llmsafespaces_user_active_workspaces",
                "Active Workspaces whose agent is read, per recorded owner (userID)." + per_user,
                ["user_id"],
            ),
            "user_disk": gauge(
                "llmsafespaces_user_disk_used_bytes",
                "Bytes used on the user's workspace volumes." + per_user,
                ["user_id"],
            ),
            "user_memory": gauge(
                "llmsafespaces_user_memory_used_bytes",
                "Memory the user's workspace pods use, in bytes." + per_user,
                ["user_id"],
            ),
        }
