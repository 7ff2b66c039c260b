"""The webhook's Prometheus metrics (default registry, exposed on the metrics port).

Request counts, the latency histogram and injection counts are recorded on every admission
request, so they are kept as plain numbers and turned into metric families only when
Prometheus scrapes: a
``prometheus_client`` Counter plus Histogram take a lock and walk the buckets in Python on
every observation, a measurable share of a review's cost. Recording and scraping both run on
the event loop, so no lock is needed.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import Any, Final

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""Upper bounds (seconds) of the latency buckets; +Inf is implied."""

_REQUESTS_NAME = "wspin_webhook_requests"
_REQUESTS_HELP = (
    "Admission requests answered, by webhook and outcome (patched, allowed, denied, invalid)."
)
_LATENCY_NAME = "wspin_webhook_request_duration_seconds"
_LATENCY_HELP = "Time from request received to response written, by webhook and outcome."
_LABELS = ["webhook", "outcome"]


class _Series:
    """One (webhook, outcome) pair: a count per bucket (the last is +Inf) and the sum."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0


_SERIES: dict[tuple[str, str], _Series] = {}


def record(webhook: str, outcome: str, seconds: float) -> None:
    """Count one answered request and observe its latency."""
    series = _SERIES.get((webhook, outcome))
    if series is None:
        series = _SERIES[(webhook, outcome)] = _Series()
    series.counts[bisect_left(BUCKETS, seconds)] += 1
    series.total += seconds


class _Requests(Collector):
    """``wspin_webhook_requests_total{webhook,outcome}``."""

    def describe(self) -> list[Metric]:
        return [CounterMetricFamily(_REQUESTS_NAME, _REQUESTS_HELP, labels=_LABELS)]

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(_REQUESTS_NAME, _REQUESTS_HELP, labels=_LABELS)
        for labels, series in sorted(_SERIES.items()):
            family.add_metric(list(labels), sum(series.counts))
        yield family


class _Latency(Collector):
    """``wspin_webhook_request_duration_seconds{webhook,outcome}``."""

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(_LATENCY_NAME, _LATENCY_HELP, labels=_LABELS)]

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(_LATENCY_NAME, _LATENCY_HELP, labels=_LABELS)
        for labels, series in sorted(_SERIES.items()):
            cumulative, buckets = 0, []
            for bound, count in zip((*BUCKETS, float("inf")), series.counts, strict=True):
                cumulative += count
                buckets.append((_le(bound), cumulative))
            family.add_metric(list(labels), buckets, series.total)
        yield family


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


_INJECTIONS_NAME = "wspin_webhook_injections"
_INJECTIONS_HELP = "Workspace pods patched with an artifact's delivery wiring, by artifact."
_INJECTED: dict[str, int] = {}


def injected(artifacts: tuple[str, ...]) -> None:
    """Count one patched pod for each artifact whose image volume the patch adds or replaces."""
    for artifact in artifacts:
        _INJECTED[artifact] = _INJECTED.get(artifact, 0) + 1


class _Injections(Collector):
    """``wspin_webhook_injections_total{artifact}``."""

    def describe(self) -> list[Metric]:
        return [CounterMetricFamily(_INJECTIONS_NAME, _INJECTIONS_HELP, labels=["artifact"])]

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(_INJECTIONS_NAME, _INJECTIONS_HELP, labels=["artifact"])
        for artifact, count in sorted(_INJECTED.items()):
            family.add_metric([artifact], count)
        yield family


# Typed Any: callers list these beside prometheus_client metric objects and call describe().
REQUESTS: Final[Any] = _Requests()
LATENCY: Final[Any] = _Latency()
INJECTIONS: Final[Any] = _Injections()
for _collector in (REQUESTS, LATENCY, INJECTIONS):
    REGISTRY.register(_collector)
