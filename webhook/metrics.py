"""The webhook's Prometheus metrics (default registry, exposed on the metrics port)."""

from __future__ import annotations

from functools import cache
from typing import Any

from prometheus_client import Counter, Histogram

REQUESTS = Counter(
    "wspin_webhook_requests_total",
    "Admission requests answered, by webhook and outcome (patched, allowed, denied, invalid).",
    ["webhook", "outcome"],
)
LATENCY = Histogram(
    "wspin_webhook_request_duration_seconds",
    "Time from request received to response written, by webhook and outcome.",
    ["webhook", "outcome"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
INJECTIONS = Counter(
    "wspin_webhook_injections_total",
    "Workspace pods patched with an artifact's delivery wiring, by artifact.",
    ["artifact"],
)


@cache
def _children(webhook: str, outcome: str) -> tuple[Any, Any]:
    """The labelled series, looked up once: ``labels()`` takes a lock on every call."""
    return REQUESTS.labels(webhook, outcome), LATENCY.labels(webhook, outcome)


def record(webhook: str, outcome: str, seconds: float) -> None:
    """Count one answered request and observe its latency."""
    requests, latency = _children(webhook, outcome)
    requests.inc()
    latency.observe(seconds)
