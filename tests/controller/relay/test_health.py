"""Router health: the Prometheus text parser and the HTTP scrape."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from controller.relay.health import HealthScrapeError, RouterHealth, parse_metrics
from tests.controller.fakerouter import FakeRouterState
from tests.controller.relay.conftest import serve
from wspin.core.errors import ConfigError

ROUTER_TEXT = """\
# HELP relay_router_relay_healthy Whether the relay passes health checks.
# TYPE relay_router_relay_healthy gauge
relay_router_relay_healthy{relay="i-0abc"} 1
# HELP relay_router_active_streams Streams in flight.
# TYPE relay_router_active_streams gauge
relay_router_active_streams{relay="i-0abc"} 3
# HELP relay_router_requests_total Requests by relay and status.
# TYPE relay_router_requests_total counter
relay_router_requests_total{relay="i-0abc",status="200"} 12847
relay_router_requests_total{relay="i-0abc",status="429"} 2
# HELP relay_router_relay_egress_bytes Bytes sent upstream.
# TYPE relay_router_relay_egress_bytes gauge
relay_router_relay_egress_bytes{relay="i-0abc"} 1.49546362e+08
# TYPE relay_router_fallback_active gauge
relay_router_fallback_active 0
"""


def test_the_routers_exact_format_parses() -> None:
    report = parse_metrics(ROUTER_TEXT)
    relay = report.relays["i-0abc"]
    assert relay.healthy is True
    assert relay.requests_total == 12849 and relay.count_429 == 2
    assert relay.active_streams == 3 and relay.egress_bytes == 149546362
    assert report.fallback_active is False


def test_relays_are_kept_apart_and_fallback_is_read() -> None:
    report = parse_metrics(
        'relay_router_relay_healthy{relay="a"} 1\n'
        'relay_router_relay_healthy{relay="b"} 0\n'
        "relay_router_fallback_active 1\n"
    )
    assert report.relays["a"].healthy and not report.relays["b"].healthy
    assert report.fallback_active


def test_empty_input_and_comments_give_an_empty_report() -> None:
    report = parse_metrics("\n# just a comment\n\n")
    assert report.relays == {} and not report.fallback_active


def test_series_without_a_relay_label_create_no_entry() -> None:
    report = parse_metrics(
        'relay_router_relay_healthy{relay=""} 1\nrelay_router_active_streams 4\n'
        'relay_router_relay_healthy{other="x"} 1\n'
    )
    assert report.relays == {}


def test_a_relay_with_only_429s_counts_them_as_its_requests() -> None:
    report = parse_metrics('relay_router_requests_total{relay="r",status="429"} 17\n')
    assert report.relays["r"].requests_total == report.relays["r"].count_429 == 17


def test_text_that_is_not_prometheus_is_an_error() -> None:
    with pytest.raises(HealthScrapeError):
        parse_metrics('relay_router_relay_healthy{relay="a" 1\n')


async def test_a_200_scrape_parses(router: tuple[FakeRouterState, str]) -> None:
    state, url = router
    state.metrics_text = ROUTER_TEXT
    report = await RouterHealth(url + "/").scrape()
    assert report.relays["i-0abc"].requests_total == 12849


async def test_a_503_is_an_error_naming_the_status(router: tuple[FakeRouterState, str]) -> None:
    state, url = router
    state.metrics_status = 503
    with pytest.raises(HealthScrapeError, match="503"):
        await RouterHealth(url).scrape()


async def test_an_unreachable_router_is_an_error_naming_the_flag() -> None:
    with pytest.raises(HealthScrapeError, match="unreachable") as raised:
        await RouterHealth("http://127.0.0.1:9").scrape()
    assert "--relay-router-url" in raised.value.fix


async def test_a_slow_router_times_out() -> None:
    release = asyncio.Event()

    async def slow(_: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text="")

    app = web.Application()
    app.router.add_get("/metrics", slow)
    runner, url = await serve(app)
    try:
        with pytest.raises(HealthScrapeError, match="unreachable"):
            await RouterHealth(url, timeout_seconds=0.2).scrape()
    finally:
        release.set()
        await runner.cleanup()


async def test_a_body_larger_than_one_read_is_parsed_whole(
    router: tuple[FakeRouterState, str],
) -> None:
    """The body arrives in several chunks; every one of them is read before parsing."""
    state, url = router
    filler = "".join(
        f'relay_router_relay_healthy{{relay="filler-{n:05d}"}} 0\n' for n in range(8000)
    )
    state.metrics_text = filler + 'relay_router_relay_healthy{relay="i-last"} 1\n'
    assert 256 * 1024 < len(state.metrics_text) < 1 << 20
    report = await RouterHealth(url).scrape()
    assert len(report.relays) == 8001
    assert report.relays["i-last"].healthy


async def test_a_body_over_the_cap_is_an_error(router: tuple[FakeRouterState, str]) -> None:
    state, url = router
    state.metrics_text = "# padding\n" * 110_000
    with pytest.raises(HealthScrapeError, match="exceed"):
        await RouterHealth(url).scrape()


@pytest.mark.parametrize("url", ["relay-router:8080", "ftp://relay-router", ""])
def test_a_router_url_that_is_not_http_stops_the_start_naming_the_flag(url: str) -> None:
    with pytest.raises(ConfigError, match="--relay-router-url"):
        RouterHealth(url)
