"""Stalled clients against the real HTTPS admission server, over real sockets.

Small deadlines keep the suite fast; the defaults are the same code with other numbers. The
last test runs ``wspin webhook`` as a process and holds 800 stalled TLS connections open
against it: its memory stays bounded, a real review is still answered at once, and every
stalled connection is closed.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import ssl
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from certs.build import issue_serving, new_ca, service_dns_names
from certs.files import write_certificates
from certs.tls import context_for
from tests.webhook.conftest import SERVICE_HOST, example_config, load_capture
from tests.webhook.process import PINS, clean_env, free_port
from webhook.app import make_app
from webhook.metrics import AdmissionMetrics
from webhook.protocol import Listener, start
from webhook.validate import ValidatorConfig
from wspin.http.probes import Readiness
from wspin.http.server import ConnectionLimits

LIMITS = ConnectionLimits(header_timeout=0.5, body_timeout=0.5, idle_timeout=1.5)
REVIEW = json.dumps(load_capture("pod-create-workspace.json"), separators=(",", ":")).encode()

DEADLINE = 25
"""Seconds: the header and body deadlines of the 800-connection test."""


def request_bytes(body: bytes = REVIEW) -> bytes:
    return (
        b"POST /mutate-pods?timeout=10s HTTP/1.1\r\nHost: " + SERVICE_HOST.encode() + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


class Server:
    def __init__(
        self,
        port: int,
        trust: ssl.SSLContext,
        listener: Listener | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.port = port
        self.trust = trust
        self.listener = listener
        """The in-process server's listener (None for a server in another process)."""
        self.registry = registry
        """The in-process server's metrics registry (None for a server in another process)."""

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(
            "127.0.0.1", self.port, ssl=self.trust, server_hostname=SERVICE_HOST
        )


async def serve(limits: ConnectionLimits) -> AsyncGenerator[Server, None]:
    now = datetime.datetime.now(datetime.UTC)
    ca = new_ca(now)
    leaf = issue_serving(ca, service_dns_names("wspin-webhook", "wspin-system"), now)
    registry = CollectorRegistry()
    app = make_app(
        example_config(), ValidatorConfig(), Readiness(), metrics=AdmissionMetrics(registry)
    )
    runner, port = await start(
        app, "127.0.0.1", 0, ssl_context=context_for(leaf.cert_pem, leaf.key_pem), limits=limits
    )
    try:
        trust = ssl.create_default_context(cadata=ca.cert_pem.decode())
        yield Server(port, trust, runner, registry)
    finally:
        await runner.cleanup()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async for running in serve(LIMITS):
        yield running


async def answered(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """Send one review on this connection; True when a 200 AdmissionReview comes back."""
    writer.write(request_bytes())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    body = json.loads(await reader.readexactly(length))
    return head.startswith(b"HTTP/1.1 200") and body["kind"] == "AdmissionReview"


async def seconds_until_closed(reader: asyncio.StreamReader, limit: float = 10) -> float:
    started = time.monotonic()
    try:
        while await asyncio.wait_for(reader.read(65536), limit):
            pass
    except (ConnectionError, ssl.SSLError):
        pass
    return time.monotonic() - started


async def test_half_a_header_is_closed_after_the_header_timeout(server: Server) -> None:
    reader, writer = await server.connect()
    writer.write(request_bytes()[:40])
    elapsed = await seconds_until_closed(reader)
    assert 0.3 < elapsed < 2.0
    writer.close()


async def test_a_connection_that_never_sends_is_closed_after_the_header_timeout(
    server: Server,
) -> None:
    reader, writer = await server.connect()
    assert await seconds_until_closed(reader) < 2.0
    writer.close()


async def test_half_a_body_is_closed_after_the_body_timeout(server: Server) -> None:
    reader, writer = await server.connect()
    whole = request_bytes()
    writer.write(whole[: len(whole) - len(REVIEW) // 2])
    elapsed = await seconds_until_closed(reader)
    assert 0.3 < elapsed < 2.0
    writer.close()


async def test_a_body_trickled_byte_by_byte_is_cut_at_the_deadline(server: Server) -> None:
    """The deadline is for the whole body, not per read: trickling does not extend it."""
    reader, writer = await server.connect()
    whole = request_bytes()
    writer.write(whole[: len(whole) - len(REVIEW)])
    started = time.monotonic()
    closed = asyncio.ensure_future(seconds_until_closed(reader))
    for byte in REVIEW[:40]:
        if closed.done():
            break
        writer.write(bytes([byte]))
        await asyncio.sleep(0.05)
    await closed
    assert time.monotonic() - started < 2.0
    writer.close()


async def test_an_idle_keep_alive_connection_outlives_the_request_deadlines(
    server: Server,
) -> None:
    reader, writer = await server.connect()
    assert await answered(reader, writer)
    await asyncio.sleep(1.0)  # twice the header and body timeouts, under the idle timeout
    assert await answered(reader, writer)
    elapsed = await seconds_until_closed(reader)
    assert 1.0 < elapsed < 3.0  # the idle timeout, 1.5 s
    writer.close()


async def test_connections_over_the_cap_are_closed_and_the_cap_frees_up() -> None:
    async for running in serve(ConnectionLimits(max_connections=4)):
        held = [await running.connect() for _ in range(4)]
        for reader, writer in held:
            assert await answered(reader, writer)
        reader, writer = await running.connect()
        assert await seconds_until_closed(reader) < 1.0
        writer.close()
        held[0][1].close()
        await held[0][1].wait_closed()
        await asyncio.sleep(0.1)
        reader, writer = await running.connect()
        assert await answered(reader, writer)
        for _, other in [*held[1:], (reader, writer)]:
            other.close()


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def test_800_stalled_connections_leave_the_webhook_process_answering(
    tmp_path: Path,
) -> None:
    now = datetime.datetime.now(datetime.UTC)
    ca = new_ca(now)
    write_certificates(
        tmp_path, ca, issue_serving(ca, service_dns_names("wspin-webhook", "wspin-system"), now)
    )
    port, metrics_port = free_port(), free_port()
    log = (tmp_path / "webhook.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "wspin.cli",
        "webhook",
        *PINS,
        *("--host", "127.0.0.1", "--port", str(port), "--metrics-port", str(metrics_port)),
        *(
            "--tls-cert-file",
            str(tmp_path / "tls.crt"),
            "--tls-key-file",
            str(tmp_path / "tls.key"),
        ),
        # Deadlines longer than opening 800 TLS connections takes, even on a loaded machine,
        # so all are held at once; still short enough that each is closed within 30 s.
        *("--header-timeout", str(DEADLINE), "--body-timeout", str(DEADLINE)),
        env=clean_env(),
        stdout=log,
        stderr=log,
    )
    server = Server(port, ssl.create_default_context(cadata=ca.cert_pem.decode()))
    stalled: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    opened_at: list[float] = []
    try:
        for _ in range(200):
            try:
                reader, writer = await server.connect()
                break
            except OSError:
                assert process.returncode is None, (tmp_path / "webhook.log").read_text()
                await asyncio.sleep(0.05)
        assert await answered(reader, writer)
        writer.close()
        whole = request_bytes()

        async def stall(index: int) -> None:
            reader, writer = await server.connect()
            # Half a header or half a body, alternately.
            writer.write(whole[:60] if index % 2 else whole[: len(whole) - len(REVIEW) // 2])
            stalled.append((reader, writer))
            opened_at.append(time.monotonic())

        started = time.monotonic()
        for batch in range(0, 800, 50):
            await asyncio.gather(*(stall(i) for i in range(batch, batch + 50)))
        opened = time.monotonic() - started
        assert opened < DEADLINE, "could not hold 800 connections at once"
        await asyncio.sleep(0.5)
        rss = rss_mib(process.pid)
        assert rss < 200, f"RSS {rss:.0f} MiB with 800 stalled connections"

        asked = time.monotonic()
        reader, writer = await server.connect()
        assert await answered(reader, writer)
        assert time.monotonic() - asked < 2.0
        writer.close()

        watching = time.monotonic()
        closing = await asyncio.gather(*(seconds_until_closed(r, 40) for r, _ in stalled))
        # Each was stalled for at most a deadline after it opened, within 30 s in all.
        held = [watching + waited - at for waited, at in zip(closing, opened_at, strict=True)]
        assert max(held) < 30, max(held)
    finally:
        for _, writer in stalled:
            writer.close()
        process.kill()
        await process.wait()
        log.close()
