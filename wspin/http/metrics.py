"""The servers' own figures for Prometheus, read at scrape time: open connections, bytes held,
and refusals by kind (the rate-limited log's full counts)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from wspin.http.server import HttpServer


class ServerCollector(Collector):
    """``wspin_http_*`` for each named server (``port`` label: "admission", "metrics", ...)."""

    def __init__(self, servers: Mapping[str, HttpServer]) -> None:
        self._servers = servers

    def collect(self) -> Iterator[Metric]:
        connections = GaugeMetricFamily(
            "wspin_http_connections", "Open connections, counted from accept.", labels=["port"]
        )
        bodies = GaugeMetricFamily(
            "wspin_http_buffered_body_bytes", "Request body bytes held.", labels=["port"]
        )
        output = GaugeMetricFamily(
            "wspin_http_queued_output_bytes", "Answer bytes waiting to be sent.", labels=["port"]
        )
        refusals = CounterMetricFamily(
            "wspin_http_refusals",
            "Connections and requests refused, shed or dropped, by kind: connection-cap, "
            "evicted, stalled-body, output-budget, send-timeout, handshake-timeout, "
            "header-timeout, body-timeout, tls, log-budget, and the HTTP status of a refused "
            "request.",
            labels=["port", "kind"],
        )
        for port, server in self._servers.items():
            connections.add_metric([port], len(server.connections))
            bodies.add_metric([port], server.buffered)
            output.add_metric([port], server.queued_output)
            for kind, count in sorted(server.refusals.counts.items()):
                refusals.add_metric([port, kind], count)
        yield from (connections, bodies, output, refusals)
