"""Every bound the HTTP server enforces, as values apart from the server code
(``wspin.http.server``), so the flag and settings modules import no server: each process's
``--help`` stays instant.

Every port of both processes is reachable by every pod in the cluster, and the admission port
is fail-closed (``failurePolicy: Fail``): while it cannot answer, no workspace pod is created.
So each resource a client can hold has a bound here, and at each bound the server sheds the
client that is doing least (an idle connection, a stalled body, a reader that stopped reading)
before it refuses one that is working.
"""

from __future__ import annotations

from dataclasses import dataclass

API_SERVER_IDLE_TIMEOUT = 90.0
"""Seconds the kube-apiserver keeps an idle connection to a webhook: its webhook client is a
client-go transport, whose ``IdleConnTimeout`` is left to ``SetOldTransportDefaults`` in
k8s.io/apimachinery/pkg/util/net/http.go, which copies Go's ``http.DefaultTransport`` (90 s)."""

READ_BYTES = 64 * 1024
"""Bytes taken from a socket at once, into one buffer the whole server shares (the event loop
hands it back before the next read), so an open connection holds no read buffer of its own.
One read is also the most a connection can have parsed and waiting to be answered."""

MIB = 1024 * 1024

BODY_STALL = 0.5
"""Seconds a body is given from its headers before the body budget may shed it as stalled:
above Linux's 200 ms minimum TCP retransmission timeout, so a body whose first segment after
the headers was lost is not shed for it."""

RATE_WINDOW = 1.0
"""Seconds over which a body's rate is judged. Each byte received pays for ``1/min_body_rate``
seconds, and a body can be at most this far ahead (nor further behind): a body that sent a
burst and then trickles is behind the rate within this window, however large the burst was,
while one that moves at the rate never is."""

SMALL_BODY_BYTES = 64 * 1024
"""A body of at most this size (every review of a real pod: the captures are 9 and 41 KB) may
use the last ``1/SMALL_BODY_SHARE`` of the body budget; a larger one may not, so large bodies
in progress never leave a review without room."""
SMALL_BODY_SHARE = 8


@dataclass(frozen=True)
class ConnectionLimits:
    """The deadlines (seconds), sizes (bytes) and counts of one listening port."""

    handshake_timeout: float = 5.0
    """From accept to the end of the TLS handshake; a client takes a few round trips."""
    header_timeout: float = 5.0
    """From the end of the handshake (or the first byte of a request) to the end of that
    request's headers. The API server sends a request whole."""
    body_timeout: float = 5.0
    """From the end of the headers to the last byte of the body."""
    idle_timeout: float = API_SERVER_IDLE_TIMEOUT + 30.0
    """Between requests on a keep-alive connection: above the API server's 90 s, so it is
    always the API server that closes an idle connection and never races a request."""
    send_timeout: float = 10.0
    """How long answers may wait for a client that stopped reading them; then the connection
    is aborted. The API server reads an answer as soon as it is sent."""
    linger_timeout: float = 2.0
    """After a refusal that ends a connection (413, 431, 400, 503), how long the server keeps
    reading and discarding what the client still sends, so the client reads the refusal
    rather than a reset (RFC 9112 §9.6)."""
    linger_bytes: int = 4 * MIB
    """The most that is read and discarded while lingering: a whole refused body fits."""
    max_connections: int = 1000
    """Open connections, counted from accept (before the TLS handshake). At the cap the
    connection with least progress towards a complete request is closed to admit the new one:
    first the one waiting longest on its client (idle, or still in its handshake or headers),
    then the oldest body behind ``min_body_rate``; a connection with a whole request to answer
    never is. So a flood of idle or trickling connections never locks out a client that is
    working; only when every connection is busy is the new one refused."""
    max_pipelined: int = 16
    """Requests a connection gets answered per turn of the event loop; the rest of what it
    pipelined waits for the next turn, with its reading paused, so one connection cannot hold
    the loop while others wait."""
    max_head_bytes: int = 64 * 1024
    """Request line plus headers (431 past it). The API server sends a few hundred bytes."""
    max_body_bytes: int = 3 * MIB
    """One request's body (413 past it): the API server caps request bodies at 3 MiB (etcd's
    1.5 MiB object limit, doubled for the object and oldObject of an UPDATE)."""
    max_buffered_body_bytes: int = 64 * MIB
    """Request body bytes held across all connections at once: 22 whole 3 MiB bodies, a
    quarter of the chart's 256 MiB memory limit. A body that would go over it first sheds the
    stalled bodies (behind ``min_body_rate``, after ``BODY_STALL``), furthest behind first; only
    when none is stalled is it refused with 503. The last ``1/SMALL_BODY_SHARE`` is kept for
    bodies of at most ``SMALL_BODY_BYTES``."""
    min_body_rate: int = 64 * 1024
    """Bytes per second a body in progress must keep up over the last ``RATE_WINDOW``; behind
    it, the body may be shed for the budget and its connection closed at the cap."""
    write_buffer_bytes: int = 64 * 1024
    """Answer bytes waiting in a connection's send queue above which the server stops reading
    and answering that connection until the client reads: a connection holds at most this
    plus one answer."""
    max_queued_output_bytes: int = 64 * MIB
    """Answer bytes waiting across all connections. Past it the connections holding most of
    it that are not reading are aborted, largest first."""
    log_lines_per_second: int = 100
    """Log lines one connection's requests may cause per second (one per admission decision
    or refused request), with ``log_burst_lines`` in hand: past it the requests are still
    answered and counted in the metrics, without their line, so one client cannot fill the
    log. The API server spreads its reviews over many connections."""
    log_burst_lines: int = 1000
    drain_timeout: float = 10.0
    """At shutdown, how long requests already arriving get to be answered (idle connections
    close at once); past it every connection left is aborted."""
