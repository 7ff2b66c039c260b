"""The connection limits' values, apart from the server code that enforces them
(``wspin.http.server``), so the flag and settings modules import no HTTP server: each
process's ``--help`` stays instant."""

from __future__ import annotations

from dataclasses import dataclass

API_SERVER_IDLE_TIMEOUT = 90.0
"""Seconds the kube-apiserver keeps an idle connection to a webhook: its webhook client is a
client-go transport, whose ``IdleConnTimeout`` is left to ``SetOldTransportDefaults`` in
k8s.io/apimachinery/pkg/util/net/http.go, which copies Go's ``http.DefaultTransport`` (90 s)."""

TLS_READ_BUFFER = 32 * 1024
"""Bytes asyncio reads from a TLS socket at once (two TLS records); its default is 256 KiB
allocated per connection, 200 MiB for 800 connections."""


@dataclass(frozen=True)
class ConnectionLimits:
    """Per-connection deadlines and the connection cap (seconds, connections)."""

    header_timeout: float = 5.0
    """From the first byte of a request (or the end of the TLS handshake) to the end of its
    headers; also the TLS handshake's own limit. The API server sends a request whole."""
    body_timeout: float = 5.0
    """From the end of the headers to the last byte of the body."""
    idle_timeout: float = API_SERVER_IDLE_TIMEOUT + 30.0
    """Between requests on a keep-alive connection: above the API server's 90 s, so it is
    always the API server that closes an idle connection and never races a request."""
    max_connections: int = 1000
    """Open connections; about 60 KiB each while stalled, 1,000 fit the chart's 256 MiB."""
    max_buffered_body_bytes: int = 64 * 1024 * 1024
    """Request body bytes held across all connections at once (the admission port): 22 whole
    3 MiB bodies, a quarter of the chart's 256 MiB limit. A body that would go over it is
    refused with 503, so slow senders make the webhook refuse, never run out of memory."""
