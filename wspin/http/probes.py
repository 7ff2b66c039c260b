"""``/healthz``, ``/readyz`` and ``/metrics``: the probe and metrics endpoints both processes
serve, written once.

Readiness is a list of named checks; each returns None when fine or a sentence saying what
is not ready yet, so ``/readyz`` answers with the reason rather than a bare 503.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from wspin.http.messages import Endpoint, Reply, Request, error_reply, text_reply

Check = Callable[[], str | None]

HEALTHZ = "/healthz"
READYZ = "/readyz"
METRICS = "/metrics"


@dataclass
class Readiness:
    """Named readiness checks, added by whichever component owns the condition."""

    checks: dict[str, Check] = field(default_factory=dict)

    def add(self, name: str, check: Check) -> None:
        self.checks[name] = check

    def problems(self) -> list[str]:
        found = []
        for name, check in self.checks.items():
            problem = check()
            if problem:
                found.append(f"{name}: {problem}")
        return found


def _get_only(answer: Callable[[], Reply]) -> Endpoint:
    def endpoint(request: Request) -> Reply:
        if request.method not in ("GET", "HEAD"):
            return error_reply(405, f"method {request.method[:16]} not allowed; send GET")
        return answer()

    return endpoint


def probe_routes(readiness: Readiness) -> dict[str, Endpoint]:
    """``GET /healthz`` (the process serves) and ``GET /readyz`` (200 ``ok``, or 503 with one
    line per check that is not ready)."""

    def ready() -> Reply:
        problems = readiness.problems()
        if problems:
            return text_reply(503, "not ready:\n" + "\n".join(problems) + "\n")
        return text_reply(200, "ok\n")

    return {HEALTHZ: _get_only(lambda: text_reply(200, "ok\n")), READYZ: _get_only(ready)}


def process_registry() -> CollectorRegistry:
    """The one registry a process serves on ``/metrics``: built once at start, handed to every
    part that exports metrics, with the process, platform and garbage-collector collectors
    already on it."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


def metrics_routes(registry: CollectorRegistry) -> dict[str, Endpoint]:
    """``GET /metrics``: the Prometheus text exposition of ``registry``."""

    def metrics() -> Reply:
        return Reply(200, generate_latest(registry), CONTENT_TYPE_LATEST)

    return {METRICS: _get_only(metrics)}


def side_routes(readiness: Readiness, registry: CollectorRegistry) -> dict[str, Endpoint]:
    """The side port: probes and metrics together."""
    return {**probe_routes(readiness), **metrics_routes(registry)}
