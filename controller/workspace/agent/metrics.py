"""Metrics of agent health, session drains and automatic suspends.

Counters carry only labels from small fixed sets (an endpoint, an outcome, a drain reason, a
runtime and security level): never a Workspace's or an owner's name, so no counter gains a
series per Workspace or per user and none grows without end.

- ``llmsafespaces_workspace_health_checks_total{endpoint}`` and
  ``llmsafespaces_workspace_health_check_failures_total{endpoint,outcome}``: agentd reads
  (healthz, statusz) and those without a usable answer (unreachable, unhealthy, unreadable);
- ``llmsafespaces_workspace_controller_restarts_total``: pods replaced after failing three
  liveness checks in a row;
- ``llmsafespaces_workspace_drain_deferred_total{reason}`` (once per drain),
  ``…_drain_forced_total{reason}`` (no progress within the stall bound, or
  ``restart_generation_user_forced``), ``…_drain_failed_open_total{reason}`` (agentd could
  not be asked) and ``llmsafespaces_workspace_drain_duration_seconds{reason,outcome}``;
- ``llmsafespaces_workspace_auto_suspensions_total{reason}`` (``idle``, ``timeout``) and
  ``llmsafespaces_workspace_ttl_expirations_total``;
- the scheduler's own: ``llmsafespaces_workspace_agent_scrape_targets``,
  ``…_agent_scrapes_in_flight`` and ``…_agent_scrape_lag_seconds`` (how late a read started
  against its deadline: a fleet larger than the concurrency bound can serve shows here).

Per-Workspace usage is reported by ``AgentUsageCollector`` as gauges computed at scrape time,
and metered for billing by ``metering``.
"""

from __future__ import annotations

from typing import Final, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controller.workspace.pod.recycle import RecycleReason

DrainReason = RecycleReason
"""A drain is labelled by why its pod is recycled (the values are the label values)."""
DRAIN_REASONS: Final[tuple[DrainReason, ...]] = (
    RecycleReason.RESTART_GENERATION,
    RecycleReason.ARCHITECTURE_DRIFT,
    RecycleReason.CREDENTIALS,
)
USER_FORCED: Final = RecycleReason.RESTART_GENERATION_USER_FORCED
DrainOutcome = Literal["idle", "failed_open", "forced", "user_forced"]
ENDPOINTS: Final = ("healthz", "statusz")
FAILURES: Final = ("unreachable", "unhealthy", "unreadable")
AUTO_SUSPEND_REASONS: Final = ("idle", "timeout")
DRAIN_BUCKETS: Final = (1, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)
LAG_BUCKETS: Final = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)


class AgentMetrics:
    """The counters and histograms above, registered once per process."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.checks = Counter(
            "llmsafespaces_workspace_health_checks_total",
            "agentd reads by the controller, by endpoint (healthz, statusz).",
            ["endpoint"],
            registry=registry,
        )
        self.check_failures = Counter(
            "llmsafespaces_workspace_health_check_failures_total",
            "agentd reads without a usable answer, by endpoint and outcome: unreachable (no "
            "answer), unhealthy (agentd says so, or 5xx), unreadable (not a report this "
            "controller reads; never restarts a pod).",
            ["endpoint", "outcome"],
            registry=registry,
        )
        self.restarts = Counter(
            "llmsafespaces_workspace_controller_restarts_total",
            "Workspace pods the controller replaced after three failed liveness checks in a "
            "row (never counted as a recovery).",
            registry=registry,
        )
        self.drain_deferred = Counter(
            "llmsafespaces_workspace_drain_deferred_total",
            "Pod recycles held back for busy agent sessions, once per drain, by reason.",
            ["reason"],
            registry=registry,
        )
        self.drain_forced = Counter(
            "llmsafespaces_workspace_drain_forced_total",
            "Pod recycles that went ahead with busy sessions: no progress within the stall "
            "bound, or the user asked (restart_generation_user_forced).",
            ["reason"],
            registry=registry,
        )
        self.drain_failed_open = Counter(
            "llmsafespaces_workspace_drain_failed_open_total",
            "Pod recycles that went ahead because agentd could not be asked about its sessions.",
            ["reason"],
            registry=registry,
        )
        self.drain_duration = Histogram(
            "llmsafespaces_workspace_drain_duration_seconds",
            "Seconds from the start of a session drain to the recycle, by reason and outcome "
            "(idle, failed_open, forced, user_forced).",
            ["reason", "outcome"],
            buckets=DRAIN_BUCKETS,
            registry=registry,
        )
        self.auto_suspensions = Counter(
            "llmsafespaces_workspace_auto_suspensions_total",
            "Workspaces the controller suspended on its own, by reason: idle "
            "(spec.autoSuspend) or timeout (spec.timeout).",
            ["reason"],
            registry=registry,
        )
        self.ttl_expirations = Counter(
            "llmsafespaces_workspace_ttl_expirations_total",
            "Suspended Workspaces ended once spec.ttlSecondsAfterSuspended passed (kept as "
            "Terminated without their volume, or deleted: --workspace-ttl-action).",
            registry=registry,
        )
        self.in_flight = Gauge(
            "llmsafespaces_workspace_agent_scrapes_in_flight",
            "agentd reads in flight (at most --agent-scrape-concurrency).",
            registry=registry,
        )
        self.targets = Gauge(
            "llmsafespaces_workspace_agent_scrape_targets",
            "Active Workspaces whose agent the controller reads.",
            registry=registry,
        )
        self.lag = Histogram(
            "llmsafespaces_workspace_agent_scrape_lag_seconds",
            "Seconds an agentd read started after its deadline; steadily high means the fleet "
            "needs more than --agent-scrape-concurrency can serve.",
            buckets=LAG_BUCKETS,
            registry=registry,
        )
        # Every series a dashboard or alert reads exists from the start, at 0.
        for endpoint in ENDPOINTS:
            self.checks.labels(endpoint)
            for outcome in FAILURES:
                self.check_failures.labels(endpoint, outcome)
        for reason in DRAIN_REASONS:
            self.drain_deferred.labels(reason)
            self.drain_forced.labels(reason)
            self.drain_failed_open.labels(reason)
        self.drain_forced.labels(USER_FORCED)
        for cause in AUTO_SUSPEND_REASONS:
            self.auto_suspensions.labels(cause)
