"""Reading a metric the way a Prometheus scrape would, from the registry a test passed in."""

from __future__ import annotations

from prometheus_client import CollectorRegistry


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    """The value of sample ``name`` with ``labels`` in ``registry``; None when absent."""
    value: float | None = registry.get_sample_value(name, labels)
    return value


def count(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """A counter's value, 0 before its first increment."""
    return sample(registry, name, **labels) or 0.0
