"""The admission port's Prometheus metrics: requests, latency and injections.

``AdmissionMetrics(registry)`` registers one collector on the registry the process passes
it (see the package docstring for the pattern). Request counts, the latency histogram and
injection counts are recorded on every admission request, so they are kept as plain numbers
and turned into metric families only when Prometheus scrapes: a ``prometheus_client``
Counter plus Histogram take a lock and walk the buckets in Python on every observation, a
measurable share of a review's cost. Recording and scraping both run on the event loop, so no
lock is needed.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""Upper bounds (seconds) of the latency buckets; +Inf is implied."""

REQUESTS: Final = "wspin_webhook_requests"
_REQUESTS_HELP: Final = (
    "Admission requests answered, by webhook and outcome (patched, allowed, denied, invalid)."
)
LATENCY: Final = "wspin_webhook_request_duration_seconds"
_LATENCY_HELP: Final = "Time from request received to response written, by webhook and outcome."
INJECTIONS: Final = "wspin_webhook_injections"
_INJECTIONS_HELP: Final = "Workspace pods patched with an artifact's delivery wiring, by artifact."
_LABELS: Final = ["webhook", "outcome"]


class _Series:
    """One (webhook, outcome) pair: a count per bucket (the last is +Inf) and the sum."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0


class AdmissionMetrics(Collector):
    """``wspin_webhook_requests_total{webhook,outcome}``,
    ``wspin_webhook_request_duration_seconds{webhook,outcome}`` and
    ``wspin_webhook_injections_total{artifact}``, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._series: dict[str, dict[str, _Series]] = {}
        """Webhook → outcome → series."""
        self._injected: dict[str, int] = {}
        registry.register(self)

    def recorder(self, webhook: str) -> Callable[[str, float], None]:
        """``record(outcome, seconds)`` for one webhook's requests, made once per endpoint: a
        request finds its series by its outcome alone."""
        by_outcome = self._series.setdefault(webhook, {})

        def record(outcome: str, seconds: float) -> None:
            series = by_outcome.get(outcome)
            if series is None:
                series = by_outcome[outcome] = _Series()
            series.counts[bisect_left(BUCKETS, seconds)] += 1
            series.total += seconds

        return record

    def injected(self, artifacts: tuple[str, ...]) -> None:
        """Count one patched pod for each artifact whose image volume the patch adds or
        replaces."""
        for artifact in artifacts:
            self._injected[artifact] = self._injected.get(artifact, 0) + 1

    def describe(self) -> list[Metric]:
        return [
            CounterMetricFamily(REQUESTS, _REQUESTS_HELP, labels=_LABELS),
            HistogramMetricFamily(LATENCY, _LATENCY_HELP, labels=_LABELS),
            CounterMetricFamily(INJECTIONS, _INJECTIONS_HELP, labels=["artifact"]),
        ]

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(REQUESTS, _REQUESTS_HELP, labels=_LABELS)
        latency = HistogramMetricFamily(LATENCY, _LATENCY_HELP, labels=_LABELS)
        every = ((w, o, s) for w, by in self._series.items() for o, s in by.items())
        for webhook, outcome, series in sorted(every, key=lambda item: item[:2]):
            labels = [webhook, outcome]
            requests.add_metric(labels, sum(series.counts))
            cumulative, buckets = 0, []
            for bound, count in zip((*BUCKETS, float("inf")), series.counts, strict=True):
                cumulative += count
                buckets.append((_le(bound), cumulative))
            latency.add_metric(labels, buckets, series.total)
        injections = CounterMetricFamily(INJECTIONS, _INJECTIONS_HELP, labels=["artifact"])
        for artifact, count in sorted(self._injected.items()):
            injections.add_metric([artifact], count)
        yield from (requests, latency, injections)


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)
