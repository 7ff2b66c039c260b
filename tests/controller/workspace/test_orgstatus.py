"""Org status lookups against a fake API service on loopback (real HTTP)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from controller.workspace.reconcile.orgstatus import OrgStatusCache, OrgStatusMetrics
from tests.controller.workspace.orgs import FakeApiService
from tests.support.clock import FakeClock
from tests.support.waiting import eventually

TOKEN = "internal-token-sekret-123"


@dataclass
class Harness:
    service: FakeApiService
    cache: OrgStatusCache
    clock: FakeClock
    registry: CollectorRegistry

    def failures(self, reason: str) -> float:
        value = self.registry.get_sample_value(
            "llmsafespaces_org_status_lookup_failures_total", {"reason": reason}
        )
        return value or 0.0


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    service = FakeApiService()
    app = web.Application()
    app.router.add_get("/api/v1/internal/orgs/{org}/status", service.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    clock = FakeClock()
    registry = CollectorRegistry()
    async with aiohttp.ClientSession() as session:
        cache = OrgStatusCache(
            session,
            f"http://127.0.0.1:{port}/",
            TOKEN,
            OrgStatusMetrics(registry),
            timeout=0.5,
            clock=clock.monotonic,
        )
        yield Harness(service, cache, clock, registry)
        await cache.close()
    if service.gate is not None:
        service.gate.set()  # a held answer would make the server wait out its shutdown
    await runner.cleanup()


async def test_the_status_is_fetched_with_the_token_and_cached_for_the_ttl(
    harness: Harness,
) -> None:
    harness.service.statuses["org-1"] = "Suspended"
    assert await harness.cache.status("org-1") == "suspended"
    assert harness.service.tokens == [TOKEN]
    harness.service.statuses["org-1"] = "active"
    harness.clock.advance(29)
    assert await harness.cache.status("org-1") == "suspended"
    assert harness.cache.fresh_for("org-1") == pytest.approx(1.0)
    harness.clock.advance(1)
    assert await harness.cache.status("org-1") == "active"
    assert harness.service.calls == ["org-1", "org-1"]


async def test_concurrent_lookups_of_one_org_make_one_request(harness: Harness) -> None:
    harness.service.statuses["org-1"] = "active"
    harness.service.gate = asyncio.Event()
    lookups = asyncio.gather(*(harness.cache.status("org-1") for _ in range(50)))
    await eventually(lambda: harness.service.calls, "the first request")
    harness.service.gate.set()  # every lookup is waiting by now: one request answers all
    results = await lookups
    assert set(results) == {"active"}
    assert harness.service.calls == ["org-1"]


async def test_a_failed_refresh_serves_the_last_known_status(harness: Harness) -> None:
    harness.service.statuses["org-1"] = "suspended"
    assert await harness.cache.status("org-1") == "suspended"
    harness.clock.advance(31)
    harness.service.fail = 503
    assert await harness.cache.status("org-1") == "suspended"
    assert harness.failures("http-503") == 1


async def test_with_nothing_known_a_failure_fails_open_and_is_counted(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    harness.service.fail = 500
    with caplog.at_level(logging.WARNING, logger="controller.orgstatus"):
        assert await harness.cache.status("org-1") is None
        assert await harness.cache.status("org-2") is None
    assert harness.failures("http-500") == 2
    lines = [r for r in caplog.records if "org status lookup failed" in r.getMessage()]
    assert len(lines) == 1, "the log line is rate-limited"
    assert TOKEN not in caplog.text


async def test_a_timeout_fails_open(harness: Harness) -> None:
    harness.service.statuses["org-1"] = "suspended"
    harness.service.gate = asyncio.Event()  # never opened: only the cache's timeout ends it
    assert await harness.cache.status("org-1") is None
    assert harness.failures("timeout") == 1


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"status": 3}', b"{}", b"x" * 70_000])
async def test_malformed_answers_are_failures_not_statuses(harness: Harness, body: bytes) -> None:
    harness.service.body = body
    assert await harness.cache.status("org-1") is None
    assert harness.failures("malformed") + harness.failures("oversized") == 1


@pytest.mark.parametrize("org", ["../../admin", "a/b", "", "x" * 200, "org?x=1", "%2e%2e"])
async def test_hostile_org_ids_are_never_sent(harness: Harness, org: str) -> None:
    assert await harness.cache.status(org) is None
    assert harness.service.calls == []
    assert harness.failures("invalid-org-id") == 1


async def test_the_api_service_down_fails_open() -> None:
    registry = CollectorRegistry()
    async with aiohttp.ClientSession() as session:
        cache = OrgStatusCache(
            session, "http://127.0.0.1:9/", TOKEN, OrgStatusMetrics(registry), timeout=0.5
        )
        assert await cache.status("org-1") is None
        await cache.close()
    assert (
        registry.get_sample_value(
            "llmsafespaces_org_status_lookup_failures_total", {"reason": "unreachable"}
        )
        == 1
    )
