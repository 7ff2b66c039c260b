"""Recovery as metrics, under the names LLMSafeSpaces dashboards and alert routes use.

Counted once the status records what they count (``recovery_report``):

- ``llmsafespaces_workspace_recovery_attempts_total{failure_class}``: failures counted, each
  a recovery attempt;
- ``llmsafespaces_workspace_recovery_backoff_duration_seconds{failure_class}``: the wait each
  failure scheduled;
- ``llmsafespaces_workspace_recovery_success_total{failure_class}`` and
  ``llmsafespaces_workspace_recovery_duration_seconds{failure_class}``: a Workspace Active again
  after failures, and the seconds since its last failure;
- ``llmsafespaces_workspace_recovery_exhausted_total{failure_class}``: RecoveryExhausted episodes;
- ``llmsafespaces_workspace_pod_failures_total{reason}``: pods that failed as a whole (ended,
  evicted, disrupted, lost, or stuck past a threshold) and were replaced;
- ``llmsafespaces_workspace_platform_boot_failures_total{container,node}``: boot failure
  episodes.

Computed at scrape time from the Workspace cache: ``llmsafespaces_workspaces_in_recovery``,
Workspaces with failures on record (nothing to keep in step, so it cannot drift).

Every label comes from a bounded set: the four classes, the reasons this package names
(anything else is ``Other``), the four boot containers, and node names. Nodes are the
platform's, not a tenant's; still, at most ``MAX_NODES`` distinct names are kept per process
and later ones count as ``other``, so a cluster that replaces nodes all day cannot grow the
series without bound.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from controller.types import Listable
from controller.workspace.recovery import boot, causes, decision
from controller.workspace.recovery import failures as fl
from wspin.core.workspace import WorkspaceStatus

BACKOFF_BUCKETS: Final = (5, 10, 20, 30, 40, 60, 80, 120, 160, 240, 300, 600, 1800)
"""Seconds: every wait of the recovery schedules is a bucket bound, so quantiles are exact."""
DURATION_BUCKETS: Final = (5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600)
MAX_NODES: Final = 256
OTHER: Final = "Other"
IN_RECOVERY: Final = "llmsafespaces_workspaces_in_recovery"
POD_REASONS: Final = frozenset(
    {
        *causes.REASONS,
        *fl.INFRASTRUCTURE_REASONS,
        fl.POD_LOST,
        fl.OOM_KILLED,
        "EvictionByEvictionAPI",
        "PreemptionByScheduler",
        "DeletionByTaintManager",
        "DeletionByPodGC",
        "TerminationByKubelet",
        "PodFailed",
    }
)
"""The ``reason`` values of the pod failures counter."""


class RecoveryMetrics:
    """The recovery counters and histograms of one process."""

    def __init__(self, registry: CollectorRegistry) -> None:
        by_class = ["failure_class"]
        self.attempts = Counter(
            "llmsafespaces_workspace_recovery_attempts_total",
            "Workspace failures counted (each a recovery attempt), by failure class.",
            by_class,
            registry=registry,
        )
        self.success = Counter(
            "llmsafespaces_workspace_recovery_success_total",
            "Workspaces Active again after failures, by the class of the last failure.",
            by_class,
            registry=registry,
        )
        self.backoff = Histogram(
            "llmsafespaces_workspace_recovery_backoff_duration_seconds",
            "Seconds each counted failure waits before its retry, by failure class.",
            by_class,
            buckets=BACKOFF_BUCKETS,
            registry=registry,
        )
        self.duration = Histogram(
            "llmsafespaces_workspace_recovery_duration_seconds",
            "Seconds from a Workspace's last failure to Active again, by failure class.",
            by_class,
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.exhausted = Counter(
            "llmsafespaces_workspace_recovery_exhausted_total",
            "RecoveryExhausted episodes: a failure class's threshold crossed.",
            by_class,
            registry=registry,
        )
        self.pod_failures = Counter(
            "llmsafespaces_workspace_pod_failures_total",
            "Workspace pods that failed as a whole (ended, evicted, disrupted, lost, or stuck "
            "past a threshold) and were replaced, by reason.",
            ["reason"],
            registry=registry,
        )
        self.boot_failures = Counter(
            "llmsafespaces_workspace_platform_boot_failures_total",
            "Platform boot failure episodes, by boot container and node (at most "
            f"{MAX_NODES} node names per process, later ones as 'other').",
            ["container", "node"],
            registry=registry,
        )
        self._nodes: set[str] = set()
        for failure_class in fl.CLASSES:
            # Present from the start, so rates and ratios read 0 rather than nothing.
            for family in (self.attempts, self.success, self.exhausted):
                family.labels(failure_class)

    def record(self, notice: decision.Notice) -> None:
        """Count what ``notice`` reports."""
        if isinstance(notice, decision.Counted):
            self.attempts.labels(notice.failure_class).inc(len(notice.backoffs))
            for wait in notice.backoffs:
                self.backoff.labels(notice.failure_class).observe(wait)
            if notice.pod_reason:
                reason = notice.pod_reason if notice.pod_reason in POD_REASONS else OTHER
                self.pod_failures.labels(reason).inc()
        elif isinstance(notice, decision.Exhausted):
            self.exhausted.labels(notice.failure_class).inc()
        elif isinstance(notice, decision.Recovered):
            self.success.labels(notice.failure_class).inc()
            self.duration.labels(notice.failure_class).observe(notice.seconds)
        else:
            container = notice.failure.container
            container = container if container in boot.CONTAINERS else OTHER
            self.boot_failures.labels(container, self._node(notice.failure.node)).inc()

    def _node(self, node: str) -> str:
        if not node:
            return "unknown"
        if node in self._nodes or len(self._nodes) < MAX_NODES:
            self._nodes.add(node)
            return node
        return "other"


class InRecoveryCollector(Collector):
    """``llmsafespaces_workspaces_in_recovery``: Workspaces with failures on record, read from
    the cache at scrape time."""

    def __init__(self, workspaces: Listable) -> None:
        self.workspaces = workspaces

    def describe(self) -> list[GaugeMetricFamily]:
        return [self._family()]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = self._family()
        count = 0
        for workspace in self.workspaces.list():
            if WorkspaceStatus.of(workspace.get("status")).consecutive_failures > 0:
                count += 1
        family.add_metric([], count)
        yield family

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            IN_RECOVERY,
            "Workspaces with consecutive failures on record (until they have been Active for "
            "the stability window). Reported by every controller replica from its cache: "
            "aggregate with max.",
        )
