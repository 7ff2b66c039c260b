"""The runtime's Prometheus metrics, named in controller-runtime's spirit, and the two
LLMSafeSpaces' dashboards and alerts read (``llmsafespaces_reconciliation_*``, by the kind
reconciled).

Registered on the manager's registry (``manager.registry``, the process's one registry,
served on ``--metrics-port``); reconcilers register their own metrics objects on it too.
"""

from __future__ import annotations

from typing import Literal

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)

# controller-runtime's reconcile_time buckets: 5 ms .. 60 s.
_RECONCILE_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.35,
    0.4,
    0.45,
    0.5,
    0.6,
    0.7,
    0.8,
    0.9,
    1.0,
    1.25,
    1.5,
    1.75,
    2.0,
    2.5,
    3.0,
    3.5,
    4.0,
    4.5,
    5.0,
    6.0,
    7.0,
    8.0,
    9.0,
    10.0,
    15.0,
    20.0,
    25.0,
    30.0,
    40.0,
    50.0,
    60.0,
)

RESULT_SUCCESS = "success"
RESULT_ERROR = "error"
RESULT_REQUEUE_AFTER = "requeue_after"
RESULT_TERMINAL = "terminal_error"

ErrorType = Literal["transient", "terminal", "unexpected"]
ERROR_TYPES: tuple[ErrorType, ...] = ("transient", "terminal", "unexpected")
"""How a reconcile failed: a ``TransientError`` (retried), a ``TerminalError`` (dropped until
the next event), anything else (retried with backoff)."""


class RuntimeMetrics:
    """Reconcile counts, errors and latency per controller; queue depth; leader status."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.reconcile_total = Counter(
            "wspin_controller_reconcile_total",
            "Reconciles per controller and result (success, error, requeue_after, terminal_error).",
            ["controller", "result"],
            registry=self.registry,
        )
        self.reconcile_errors = Counter(
            "wspin_controller_reconcile_errors_total",
            "Reconciles that raised, per controller.",
            ["controller"],
            registry=self.registry,
        )
        self.reconcile_time = Histogram(
            "wspin_controller_reconcile_time_seconds",
            "Time per reconcile, per controller.",
            ["controller"],
            buckets=_RECONCILE_BUCKETS,
            registry=self.registry,
        )
        self.active_workers = Gauge(
            "wspin_controller_active_workers",
            "Workers currently running a reconcile, per controller.",
            ["controller"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "wspin_workqueue_depth",
            "Keys waiting in the work queue.",
            ["name"],
            registry=self.registry,
        )
        self.queue_retries = Counter(
            "wspin_workqueue_retries_total",
            "Keys re-queued with backoff after a failure.",
            ["name"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "wspin_controller_leader",
            "1 while this replica holds the leader lease (or leader election is off), else 0.",
            ["lease", "identity"],
            registry=self.registry,
        )
        self.reconciliation_duration = Histogram(
            "llmsafespaces_reconciliation_duration_seconds",
            "Time per reconcile, by the kind reconciled (resource) and status (ok, error).",
            ["resource", "status"],
            registry=self.registry,
        )
        self.reconciliation_errors = Counter(
            "llmsafespaces_reconciliation_errors_total",
            "Reconciles that failed, by the kind reconciled (resource) and error_type: "
            "transient (retried), terminal (dropped until the next event), unexpected "
            "(retried with backoff).",
            ["resource", "error_type"],
            registry=self.registry,
        )

    def init_controller(self, name: str, resource: str = "") -> None:
        """Expose zero-valued series at once so dashboards and alerts see the controller
        (``resource``: the kind it reconciles)."""
        for error_type in ERROR_TYPES:
            self.reconciliation_errors.labels(resource, error_type)
        for result in (RESULT_SUCCESS, RESULT_ERROR, RESULT_REQUEUE_AFTER, RESULT_TERMINAL):
            self.reconcile_total.labels(name, result)
        self.reconcile_errors.labels(name)
        self.active_workers.labels(name).set(0)
        self.queue_depth.labels(name).set(0)
        self.queue_retries.labels(name)
