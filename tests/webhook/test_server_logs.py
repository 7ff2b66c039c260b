"""Server log records never carry what a client sent (headers, body, URL).

Real servers on loopback, real sockets and the production JSON formatter: a refused request
is logged with the parser's fixed reason only, on the admission port and on the plain side
port alike, and an endpoint that fails quoting the body is logged with the exception's type
and frames, never its message.
"""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from prometheus_client import CollectorRegistry

from webhook.app import make_app
from webhook.demo import DEMO_CONFIG
from webhook.validate import ValidatorConfig
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
