"""Raw HTTP/1.1 over verified TLS against the admission port, in-process or as a process.

Bytes are written as a client writes them and the answers read back byte for byte, so the
tests see framing, Connection headers and closes exactly as the API server would.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import socket
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from certs.build import issue_serving, new_ca, service_dns_names
from certs.files import write_certificates
from certs.tls import context_for
from tests.webhook.conftest import SERVICE_HOST, load_capture
from tests.webhook.process import PINS, clean_env, free_port
from webhook.app import make_app
from webhook.demo import DEMO_CONFIG
from webhook.metrics import AdmissionMetrics
from webhook.validate import ValidatorConfig
from wspin.http.limits import ConnectionLimits
from wspin.http.probes import Readiness
from wspin.http.server import HttpServer, serve

REVIEW = json.dumps(load_capture("pod-create-workspace.json"), separators=(",", ":")).encode()


QUICK = ConnectionLimits(
    header_timeout=2.0, body_timeout=2.0, idle_timeout=10.0, linger_timeout=0.3, drain_timeout=1
)
"""Deadlines short enough for tests, long enough for a loaded machine."""
LINGER = QUICK.linger_timeout + 0.5
"""Seconds: a refused connection is closed within its linger time and a sweep."""


def review_for(uid: str) -> bytes:
    review = json.loads(REVIEW)
    review["request"]["uid"] = uid
    return json.dumps(review, separators=(",", ":")).encode()


def request_bytes(body: bytes = REVIEW, extra: bytes = b"") -> bytes:
    """A review POSTed as the API server sends it."""
    return (
        b"POST /mutate-pods?timeout=10s HTTP/1.1\r\nHost: %s\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s"
        % (SERVICE_HOST.encode(), len(body), extra, body)
    )


def get(path: str, extra: bytes = b"", version: bytes = b"HTTP/1.1") -> bytes:
    return b"GET %s %s\r\nHost: %s\r\n%s\r\n" % (
        path.encode(),
        version,
        SERVICE_HOST.encode(),
        extra,
    )


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    """Lower-cased names."""
    body: bytes

    def json(self) -> Any:
        assert self.headers["content-type"] == "application/json", self.headers
        return json.loads(self.body)


async def read_answer(reader: asyncio.StreamReader, timeout: float = 5) -> Answer:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    status_line, *lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
    assert status_line.startswith("HTTP/1.1 "), status_line
    headers = {}
    for line in lines:
        name, value = line.split(":", 1)
        headers[name.strip().lower()] = value.strip()
    body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), timeout)
    return Answer(int(status_line.split()[1]), headers, body)


def parse_answers(stream: bytes) -> list[Answer]:
    """Every answer in ``stream``, which must end with the last one's body."""
    answers, at = [], 0
    while at < len(stream):
        end = stream.index(b"\r\n\r\n", at)
        status_line, *lines = stream[at:end].decode("latin-1").split("\r\n")
        headers = {name.lower(): value for name, value in (ln.split(": ", 1) for ln in lines)}
        length = int(headers["content-length"])
        answers.append(
            Answer(int(status_line.split()[1]), headers, stream[end + 4 : end + 4 + length])
        )
        at = end + 4 + length
    assert at == len(stream)
    return answers


@dataclass
class Server:
    port: int
    trust: ssl.SSLContext
    http: HttpServer | None = None
    """The in-process server (None for a server in another process)."""
    registry: CollectorRegistry | None = None
    """The in-process server's metrics registry (None for a server in another process)."""

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(
            "127.0.0.1", self.port, ssl=self.trust, server_hostname=SERVICE_HOST
        )

    async def review_seconds(self) -> float:
        """Seconds a real review on a new connection takes to be answered with a 200."""
        started = time.monotonic()
        reader, writer = await self.connect()
        try:
            assert await answered(reader, writer)
        finally:
            writer.close()
        return time.monotonic() - started


def throwaway_tls() -> tuple[ssl.SSLContext, ssl.SSLContext, Any, Any]:
    """(server context, client trust, CA, leaf) for the Service's DNS names."""
    now = datetime.datetime.now(datetime.UTC)
    ca = new_ca(now)
    leaf = issue_serving(ca, service_dns_names("wspin-webhook", "wspin-system"), now)
    trust = ssl.create_default_context(cadata=ca.cert_pem.decode())
    return context_for(leaf.cert_pem, leaf.key_pem), trust, ca, leaf


@contextlib.asynccontextmanager
async def serving(limits: ConnectionLimits) -> AsyncIterator[Server]:
    """The admission routes over TLS on loopback, in this process, stopped on the way out."""
    context, trust, _, _ = throwaway_tls()
    registry = CollectorRegistry()
    app = make_app(DEMO_CONFIG, ValidatorConfig(), Readiness(), metrics=AdmissionMetrics(registry))
    server = await serve(app, "127.0.0.1", 0, ssl_context=context, limits=limits)
    try:
        yield Server(server.port, trust, server, registry)
    finally:
        await server.shutdown()


async def answered(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """Send one review on this connection; True when a 200 AdmissionReview comes back."""
    writer.write(request_bytes())
    answer = await read_answer(reader)
    return answer.status == 200 and answer.json()["kind"] == "AdmissionReview"


async def seconds_until_closed(reader: asyncio.StreamReader, limit: float = 10) -> float:
    """Read and discard until the server closes (or resets) the connection."""
    started = time.monotonic()
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while await asyncio.wait_for(reader.read(65536), limit):
            pass
    return time.monotonic() - started


async def until(condition: Callable[[], bool], timeout: float = 10) -> None:
    """Wait for ``condition`` to hold, looking every 10 ms."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@dataclass
class WebhookProcess:
    """``wspin webhook`` as deployed, on loopback, with a throwaway CA."""

    process: asyncio.subprocess.Process
    server: Server
    log: Path
    metrics_port: int

    def rss(self) -> float:
        return rss_mib(self.process.pid)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    async def sample(self, name: str, **labels: str) -> float:
        """One sample scraped from the metrics port (0 when absent)."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.metrics_port)
        writer.write(get("/metrics", b"Connection: close\r\n"))
        (answer,) = parse_answers(await asyncio.wait_for(reader.read(), 5))
        writer.close()
        for family in text_string_to_metric_families(answer.body.decode()):
            for sample in family.samples:
                if sample.name == name and sample.labels == labels:
                    return sample.value
        return 0.0

    async def healthz_seconds(self) -> float:
        """Seconds a ``GET /healthz`` on a new connection to the probe port takes to be
        answered with a 200, as the kubelet probes."""
        started = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", self.metrics_port)
        try:
            writer.write(get("/healthz"))
            assert (await read_answer(reader)).status == 200
        finally:
            writer.close()
        return time.monotonic() - started

    async def refusals(self, kind: str, port: str = "admission") -> float:
        """``wspin_http_refusals_total`` of ``kind``."""
        return await self.sample("wspin_http_refusals_total", port=port, kind=kind)


@contextlib.asynccontextmanager
async def webhook_process(
    folder: Path, *flags: str, python: str = sys.executable, env: dict[str, str] | None = None
) -> AsyncIterator[WebhookProcess]:
    """Start ``wspin webhook`` with ``flags`` (ports chosen by the test), wait until it
    answers a review, and kill it on the way out."""
    now = datetime.datetime.now(datetime.UTC)
    ca = new_ca(now)
    write_certificates(
        folder, ca, issue_serving(ca, service_dns_names("wspin-webhook", "wspin-system"), now)
    )
    port, metrics_port = free_port(), free_port()
    log = folder / "webhook.log"
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            python,
            "-m",
            "wspinctl.cli",
            "webhook",
            *PINS,
            *("--host", "127.0.0.1", "--port", str(port), "--metrics-port", str(metrics_port)),
            *(
                "--tls-cert-file",
                str(folder / "tls.crt"),
                "--tls-key-file",
                str(folder / "tls.key"),
            ),
            *flags,
            env=env or clean_env(),
            stdout=out,
            stderr=out,
        )
    running = WebhookProcess(
        process,
        Server(port, ssl.create_default_context(cadata=ca.cert_pem.decode())),
        log,
        metrics_port,
    )
    try:
        await _until_serving(running)
        yield running
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def _until_serving(running: WebhookProcess, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            await running.server.review_seconds()
            return
        except OSError:
            assert running.process.returncode is None, running.output()
            assert time.monotonic() < deadline, running.output()
            await asyncio.sleep(0.05)


async def gather_bounded(jobs: list[Callable[[], Awaitable[Any]]], at_once: int = 50) -> list[Any]:
    """Run ``jobs`` with at most ``at_once`` in flight."""
    gate = asyncio.Semaphore(at_once)

    async def one(job: Callable[[], Awaitable[Any]]) -> Any:
        async with gate:
            return await job()

    return await asyncio.gather(*(one(job) for job in jobs))


def budget_limits(bodies: float) -> ConnectionLimits:
    """Room for ``bodies`` reviews; deadlines far beyond what the test takes, so only the
    budget's own rule can free a held body."""
    return ConnectionLimits(
        header_timeout=10,
        body_timeout=10,
        linger_timeout=0.3,
        drain_timeout=1,
        max_buffered_body_bytes=int(len(REVIEW) * bodies),
    )


async def hold_body(server: Server) -> asyncio.StreamWriter:
    """A connection that sent three quarters of a review's body and then stopped."""
    _, stalled = await server.connect()
    whole = request_bytes()
    stalled.write(whole[: len(whole) - len(REVIEW) // 4])
    await stalled.drain()
    assert server.http is not None
    http = server.http
    await until(lambda: http.buffered >= len(REVIEW) * 3 // 4)
    return stalled


async def slow_reader(server: Server, reviews: int) -> asyncio.StreamWriter:
    """A connection that pipelines ``reviews`` reviews and reads nothing (small window)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", server.port))
    _, writer = await asyncio.open_connection(
        sock=sock, ssl=server.trust, server_hostname=SERVICE_HOST
    )
    writer.write(request_bytes() * reviews)
    return writer


def body_head(size: int, path: bytes = b"/mutate-pods") -> bytes:
    """A review's head as the API server sends it, for a body of ``size`` bytes."""
    return (
        b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % (path, SERVICE_HOST.encode(), size)
    )


@dataclass
class Sent:
    bytes: int = 0


@contextlib.asynccontextmanager
async def sending(writer: asyncio.StreamWriter, piece: bytes, every: float) -> AsyncIterator[Sent]:
    """Write ``piece`` every ``every`` seconds while the block runs (a body that trickles or
    moves at a chosen rate), counting what was sent; stops quietly when the server closes the
    connection."""
    sent = Sent()

    async def go_on() -> None:
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            while not writer.is_closing():
                writer.write(piece)
                sent.bytes += len(piece)
                await writer.drain()
                await asyncio.sleep(every)

    task = asyncio.ensure_future(go_on())
    try:
        yield sent
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
