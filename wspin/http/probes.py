"""The plain-HTTP side server both processes run: ``/healthz``, ``/readyz`` and ``/metrics``.

Readiness is a list of named checks; each returns None when fine or a sentence saying what
is not ready yet, so ``/readyz`` answers with the reason rather than a bare 503.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from wspin.http.server import ConnectionLimits, GuardedSite

DEFAULT_LIMITS = ConnectionLimits()

Check = Callable[[], str | None]


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


def add_probe_routes(app: web.Application, readiness: Readiness) -> None:
    """``/healthz`` (the process serves) and ``/readyz`` (every check passes)."""

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        problems = readiness.problems()
        if problems:
            return web.Response(status=503, text="not ready:\n" + "\n".join(problems) + "\n")
        return web.Response(text="ok\n")

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)


def process_registry() -> CollectorRegistry:
    """The one registry a process serves on ``/metrics``: built once at start, handed to every
    part that exports metrics, with the process, platform and garbage-collector collectors
    already on it."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


def probe_app(readiness: Readiness, registry: CollectorRegistry) -> web.Application:
    """The side server: probes plus the Prometheus exposition of ``registry``."""
    app = web.Application()
    add_probe_routes(app, readiness)

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/metrics", metrics)
    return app


async def start(
    app: web.Application,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None = None,
    limits: ConnectionLimits = DEFAULT_LIMITS,
) -> tuple[web.AppRunner, int]:
    """Start ``app`` on host:port (0 = any free port) with the deadlines and connection cap
    of ``limits``; returns the runner and the bound port."""
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    site = GuardedSite(runner, host, port, limits, ssl_context=ssl_context)
    await site.start()
    return runner, site.bound_port
