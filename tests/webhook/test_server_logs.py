"""Server log records never carry what a client sent (headers, body, URL).

Real servers on loopback, real sockets and the production JSON formatter. The admission port
(``webhook/protocol.py``) logs a refused request with the parser's fixed reason only. The
aiohttp servers (the side port, the controller) log a refused header line and a handler that
fails quoting the body with aiohttp's fixed text and the exception's type only.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from webhook.app import make_app
from webhook.demo import DEMO_CONFIG
from webhook.protocol import start as start_admission
from webhook.validate import ValidatorConfig
from wspin.core.logs import JSONFormatter
from wspin.http.probes import Readiness, probe_app, start

SECRET = "sk-live-7f3a9c"


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JSONFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield stream
    finally:
        root.removeHandler(handler)


async def send_raw(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    reply = await reader.read(200)
    writer.close()
    await writer.wait_closed()
    return reply


def aiohttp_records(stream: io.StringIO) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    return [line for line in lines if str(line["logger"]).startswith("aiohttp.")]


REFUSED_HEADER = (
    b"POST /mutate-pods HTTP/1.1\r\nHost: wspin\r\n"
    b"Authorization: Bearer " + SECRET.encode() + b"\x01\r\n\r\n"
)


async def test_the_admission_port_logs_a_refused_header_line_without_the_header(
    log_lines: io.StringIO,
) -> None:
    listener, port = await start_admission(
        make_app(DEMO_CONFIG, ValidatorConfig(), Readiness()), "127.0.0.1", 0
    )
    try:
        reply = await send_raw(port, REFUSED_HEADER)
        await asyncio.sleep(0.05)
    finally:
        await listener.cleanup()
    assert reply.startswith(b"HTTP/1.1 400")
    assert SECRET.encode() not in reply
    assert SECRET not in log_lines.getvalue()
    (record,) = [json.loads(line) for line in log_lines.getvalue().splitlines()]
    assert record["logger"] == "wspin.webhook"
    assert record["status"] == 400
    assert "malformed HTTP request" in str(record["reason"])


async def test_an_aiohttp_server_logs_a_refused_header_line_without_the_header(
    log_lines: io.StringIO,
) -> None:
    runner, port = await start(probe_app(Readiness(), CollectorRegistry()), "127.0.0.1", 0)
    try:
        assert (await send_raw(port, REFUSED_HEADER)).startswith(b"HTTP/1.0 400")
        await asyncio.sleep(0.05)
    finally:
        await runner.cleanup()
    assert SECRET not in log_lines.getvalue()
    (record,) = aiohttp_records(log_lines)
    assert record["logger"] == "aiohttp.server"
    assert record["errorType"] == "BadHttpMessage"
    assert "Error handling request" in str(record["msg"])


async def test_a_failing_handler_is_logged_without_the_body_it_quoted(
    log_lines: io.StringIO,
) -> None:
    async def failing(request: web.Request) -> web.Response:
        raise RuntimeError("could not handle " + await request.text())

    app = web.Application()
    app.router.add_post("/x", failing)
    runner, port = await start(app, "127.0.0.1", 0)
    try:
        body = json.dumps({"env": [{"name": "API_KEY", "value": SECRET}]}).encode()
        raw = b"POST /x?token=" + SECRET.encode() + b" HTTP/1.1\r\nHost: a\r\n"
        raw += b"Content-Length: %d\r\n\r\n" % len(body) + body
        assert (await send_raw(port, raw)).startswith(b"HTTP/1.1 500")
        await asyncio.sleep(0.05)
    finally:
        await runner.cleanup()
    assert SECRET not in log_lines.getvalue()
    (record,) = aiohttp_records(log_lines)
    assert record["errorType"] == "RuntimeError"
    assert "error" not in record
