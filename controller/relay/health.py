"""Relay health as the relay-router sees it, read from the router's Prometheus ``/metrics``.

The controller never probes VMs itself: the router already probes every relay and is the
party whose view matters (it decides where traffic goes). Parsing uses prometheus-client's
own text parser rather than line splitting, so label escaping and exponents are right.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from controller.toolkit.bodies import BodyTooLarge, read_capped
from wspin.core.errors import ConfigError, WspinError

HEALTHY = "relay_router_relay_healthy"
ACTIVE_STREAMS = "relay_router_active_streams"
REQUESTS = "relay_router_requests_total"
EGRESS = "relay_router_relay_egress_bytes"
FALLBACK = "relay_router_fallback_active"

_HTTP_URL = re.compile(r"^https?://[^/\s]+\S*$")

MAX_BODY = 1 << 20
"""The router exposes a handful of series per relay; a 1 MiB body means something is wrong."""


class HealthScrapeError(WspinError):
    """The router's metrics could not be fetched or parsed."""


@dataclass
class RelayHealth:
    healthy: bool = False
    active_streams: int = 0
    requests_total: int = 0
    count_429: int = 0
    egress_bytes: int = 0


@dataclass
class HealthReport:
    relays: dict[str, RelayHealth] = field(default_factory=dict)
    fallback_active: bool = False


def parse_metrics(text: str) -> HealthReport:
    """Per-relay health and traffic from the router's exposition text.

    Samples without a non-empty ``relay`` label are ignored, so they never create an entry.
    """
    report = HealthReport()
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as err:
        raise HealthScrapeError(f"router metrics are not valid Prometheus text: {err}") from err
    for family in families:
        for sample in family.samples:
            if sample.name == FALLBACK:
                report.fallback_active = report.fallback_active or sample.value > 0
                continue
            relay_id = sample.labels.get("relay", "")
            if not relay_id or sample.name not in (HEALTHY, ACTIVE_STREAMS, REQUESTS, EGRESS):
                continue
            relay = report.relays.setdefault(relay_id, RelayHealth())
            value = _count(sample.value)
            if sample.name == HEALTHY:
                relay.healthy = sample.value > 0
            elif sample.name == ACTIVE_STREAMS:
                relay.active_streams = value
            elif sample.name == EGRESS:
                relay.egress_bytes = value
            else:
                relay.requests_total += value
                if sample.labels.get("status") == "429":
                    relay.count_429 += value
    return report


def check_router_url(router_url: str) -> str:
    """``router_url`` when it can be scraped; ``ConfigError`` naming the flag otherwise.

    Checked at start: a URL aiohttp cannot fetch would fail every scrape at debug level, and
    with no health report no relay would ever turn healthy."""
    if not _HTTP_URL.match(router_url):
        raise ConfigError(
            f"--relay-router-url must be an http(s) URL (got {router_url!r})",
            "set --relay-router-url / controller.inferenceRelay.routerURL "
            "to e.g. http://relay-router:8080",
        )
    return router_url


class RouterHealth:
    """Scrapes ``<router>/metrics``.

    A session per scrape: one request every 10-30 s does not need pooling, and nothing has
    to be closed at shutdown.
    """

    def __init__(self, router_url: str, timeout_seconds: float = 5.0) -> None:
        check_router_url(router_url)
        self.url = router_url.rstrip("/") + "/metrics"
        self.timeout = aiohttp.ClientTimeout(total=timeout_seconds)

    async def scrape(self) -> HealthReport:
        try:
            async with (
                aiohttp.ClientSession(timeout=self.timeout) as session,
                session.get(self.url) as response,
            ):
                if response.status != 200:
                    raise HealthScrapeError(
                        f"relay router {self.url} answered HTTP {response.status}"
                    )
                body = await read_capped(response, MAX_BODY)
        except BodyTooLarge:
            raise HealthScrapeError(
                f"relay router {self.url} metrics exceed {MAX_BODY} bytes"
            ) from None
        except (TimeoutError, aiohttp.ClientError) as err:
            raise HealthScrapeError(
                f"relay router {self.url} unreachable: {err or type(err).__name__}",
                "check --relay-router-url and the relay-router Service",
            ) from err
        return parse_metrics(body.decode("utf-8", errors="replace"))


def _count(value: float) -> int:
    if value != value or value < 0:  # NaN or negative: not a count
        return 0
    return int(value)
