"""Server log records never carry what a client sent (headers, body, URL), and what they
take from a request is bounded.

Real servers on loopback, real sockets and the production JSON formatter: a refused request
is logged with the parser's fixed reason only, on the admission port and on the plain side
port alike, and an endpoint that fails quoting the body is logged with the exception's type
and frames, never its message. Every request field a decision's line carries is cut to a
bound, and one connection's requests cause at most its log budget of lines: the rest are
answered and counted, unlogged.
"""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from prometheus_client import CollectorRegistry

from tests.webhook.conftest import load_capture
from webhook.app import make_app
from webhook.demo import DEMO_CONFIG
from webhook.metrics import AdmissionMetrics
from webhook.responses import MAX_MESSAGE_CHARS
from webhook.validate import ValidatorConfig
from wspin.http.limits import ConnectionLimits
from wspin.http.messages import Reply, Request, Routes
from wspin.http.probes import Readiness, side_routes
from wspin.http.server import serve

SECRET = "sk-live-7f3a9c"


async def send_raw(port: int, raw: bytes) -> bytes:
    """Send ``raw`` and read until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    reply = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    await writer.wait_closed()
    return reply


def records(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


REFUSED_HEADER = (
    b"POST /mutate-pods HTTP/1.1\r\nHost: wspin\r\n"
    b"Authorization: Bearer " + SECRET.encode() + b"\x01\r\n\r\n"
)


@pytest.mark.parametrize(
    "routes",
    [
        pytest.param(lambda: make_app(DEMO_CONFIG, ValidatorConfig(), Readiness()), id="admission"),
        pytest.param(lambda: side_routes(Readiness(), CollectorRegistry()), id="side"),
    ],
)
async def test_a_refused_header_line_is_logged_without_the_header(
    log_lines: io.StringIO, routes: object
) -> None:
    assert callable(routes)
    server = await serve(routes(), "127.0.0.1", 0)
    try:
        reply = await send_raw(server.port, REFUSED_HEADER)  # the refusal is logged before it
    finally:
        await server.shutdown()
    assert reply.startswith(b"HTTP/1.1 400")
    assert SECRET.encode() not in reply
    assert SECRET not in log_lines.getvalue()
    (record,) = records(log_lines)
    assert record["logger"] == "wspin.http"
    assert record["status"] == 400
    assert "malformed HTTP request" in str(record["reason"])


async def test_a_failing_endpoint_is_logged_without_the_body_it_quoted(
    log_lines: io.StringIO,
) -> None:
    def failing(request: Request) -> Reply:
        raise RuntimeError("could not handle " + request.body.decode())

    routes: Routes = {"/x": failing}
    server = await serve(routes, "127.0.0.1", 0)
    try:
        body = json.dumps({"env": [{"name": "API_KEY", "value": SECRET}]}).encode()
        raw = b"POST /x?token=" + SECRET.encode() + b" HTTP/1.1\r\nHost: a\r\n"
        raw += b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        assert (await send_raw(server.port, raw)).startswith(b"HTTP/1.1 500")
    finally:
        await server.shutdown()
    assert SECRET not in log_lines.getvalue()
    (record,) = records(log_lines)
    assert record["msg"] == "endpoint failed"
    assert record["errorType"] == "RuntimeError"
    assert "in failing" in str(record["frames"])
    assert "error" not in record


def post(body: bytes, close: bool = False) -> bytes:
    return (
        b"POST /mutate-pods HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n%s"
        b"Content-Length: %d\r\n\r\n%s"
        % (b"Connection: close\r\n" if close else b"", len(body), body)
    )


async def test_one_connection_causes_at_most_its_log_budget_of_lines(
    log_lines: io.StringIO,
) -> None:
    """400 pipelined requests on one connection, each a line when logged: every one is
    answered and counted, its budget of them is logged, and the rest are one refusal line.
    Another connection still gets its own lines."""
    registry = CollectorRegistry()
    routes = make_app(
        DEMO_CONFIG, ValidatorConfig(), Readiness(), metrics=AdmissionMetrics(registry)
    )
    limits = ConnectionLimits(log_burst_lines=5, log_lines_per_second=1)
    server = await serve(routes, "127.0.0.1", 0, limits=limits)
    try:
        bad = b"{not json"
        reply = await send_raw(server.port, post(bad) * 399 + post(bad, close=True))
        assert reply.count(b"HTTP/1.1 400 ") == 400
        assert (await send_raw(server.port, post(bad, close=True))).startswith(b"HTTP/1.1 400")
    finally:
        await server.shutdown()
    counted = registry.get_sample_value(
        "wspin_webhook_requests_total", {"webhook": "mutate-pods", "outcome": "invalid"}
    )
    assert counted == 401
    lines = records(log_lines)
    rejected = [r for r in lines if r["msg"] == "rejected admission request"]
    assert 6 <= len(rejected) <= 6 + 5  # the budget, a refill or few, the other connection
    over = [r for r in lines if r.get("kind") == "log-budget"]
    assert len(over) == 1  # itself logged at most once per interval


async def test_request_values_in_a_decision_line_and_its_answer_are_bounded(
    log_lines: io.StringIO,
) -> None:
    review = load_capture("pod-create-workspace.json")
    huge = "n" * (256 * 1024)
    review["request"].update(name=huge, namespace=huge, operation=huge)
    review["request"]["object"]["metadata"]["name"] = huge
    server = await serve(make_app(DEMO_CONFIG, ValidatorConfig(), Readiness()), "127.0.0.1", 0)
    try:
        reply = await send_raw(server.port, post(json.dumps(review).encode(), close=True))
    finally:
        await server.shutdown()
    answer = json.loads(reply.split(b"\r\n\r\n", 1)[1])
    assert len(answer["response"]["status"]["message"]) <= MAX_MESSAGE_CHARS
    assert len(reply) < 4096
    line = log_lines.getvalue()
    assert 0 < len(line) < 4096, len(line)
