"""Admission throughput through the real HTTPS server, and the injector's in-process cost.

Throughput: each server runs in its own process (as in production), and a raw-TLS client in
this process drives it with keep-alive connections and pre-encoded requests, so the client
costs as little as possible and the two servers are measured the same way. The baseline is
a bare aiohttp handler that parses the same review and answers "allowed".
"""

from __future__ import annotations

import asyncio
import datetime
import json
import multiprocessing
import ssl
import statistics
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

import orjson
from aiohttp import web

from bench.table import Row
from certs.build import KeyPair, issue_serving, new_ca
from certs.tls import context_for
from tests.fixtures import ADMISSION
from webhook.admission import review_pod
from webhook.app import make_app
from webhook.demo import DEMO_CONFIG
from webhook.inject import inject
from webhook.validate import ValidatorConfig
from wspin.serving import Readiness, start

CAPTURE = ADMISSION / "pod-create-many-containers.json"
CONFIG = DEMO_CONFIG
HOST = "wspin-webhook.wspin-system.svc"
CONNECTIONS = 8
WINDOW = 1.5
ROUNDS = 9


def _bare_app() -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        review = orjson.loads(await request.read())
        uid = review["request"]["uid"]
        body = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": True},
        }
        return web.json_response(body, dumps=lambda o: orjson.dumps(o).decode())

    app = web.Application(client_max_size=4 * 1024 * 1024)
    app.router.add_post("/mutate-pods", handle)
    return app


def _serve(mode: str, leaf_pem: bytes, key_pem: bytes, pipe: Connection) -> None:
    async def main() -> None:
        app = make_app(CONFIG, ValidatorConfig(), Readiness()) if mode == "wspin" else _bare_app()
        runner, port = await start(app, "127.0.0.1", 0, ssl_context=context_for(leaf_pem, key_pem))
        pipe.send(port)
        await asyncio.get_running_loop().run_in_executor(None, pipe.recv)
        await runner.cleanup()

    import logging

    logging.disable(logging.CRITICAL)  # measure serving, not log formatting to a pipe
    asyncio.run(main())


async def _drive(port: int, trust: ssl.SSLContext, request: bytes, seconds: float) -> int:
    """Send ``request`` over CONNECTIONS keep-alive TLS connections for ``seconds``."""
    deadline = time.perf_counter() + seconds
    done = 0

    async def one_connection() -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=trust, server_hostname=HOST
        )
        while time.perf_counter() < deadline:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head[:80]
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            await reader.readexactly(length)
            done += 1
        writer.close()

    await asyncio.gather(*(one_connection() for _ in range(CONNECTIONS)))
    return done


def _start_server(mode: str, leaf: KeyPair) -> tuple[BaseProcess, Connection, int]:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(mode, leaf.cert_pem, leaf.key_pem, child))
    server.start()
    port: int = parent.recv()
    return server, parent, port


def _stop_server(server: BaseProcess, pipe: Connection) -> None:
    pipe.send("stop")
    server.join(timeout=10)
    if server.is_alive():
        server.kill()


def bench_admission_throughput() -> list[Row]:
    """Both servers run at once; short windows alternate between them and the medians are
    compared, so drift in the machine's load affects both alike."""
    now = datetime.datetime.now(datetime.UTC)
    ca = new_ca(now)
    leaf = issue_serving(ca, [HOST], now)
    trust = ssl.create_default_context(cadata=ca.cert_pem.decode())
    body = json.dumps(json.loads(CAPTURE.read_text()), separators=(",", ":")).encode()
    request = (
        b"POST /mutate-pods?timeout=10s HTTP/1.1\r\nHost: "
        + HOST.encode()
        + b"\r\nContent-Type: application/json\r\nAccept: application/json, */*\r\n"
        + b"User-Agent: kube-apiserver-admission\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    servers = {mode: _start_server(mode, leaf) for mode in ("bare", "wspin")}
    rates: dict[str, list[float]] = {"bare": [], "wspin": []}
    try:
        for _, _, port in servers.values():  # warm-up: imports, TLS, caches
            asyncio.run(_drive(port, trust, request, 1.0))
        for _ in range(ROUNDS):
            for mode, (_, _, port) in servers.items():
                rates[mode].append(asyncio.run(_drive(port, trust, request, WINDOW)) / WINDOW)
    finally:
        for server, pipe, _ in servers.values():
            _stop_server(server, pipe)
    bare, real = statistics.median(rates["bare"]), statistics.median(rates["wspin"])
    return [
        Row(
            "HTTPS reviews/s, many-containers pod, vs bare aiohttp",
            real / bare,
            ">= 0.85",
            f"wspin {real:,.0f}/s, bare handler {bare:,.0f}/s (medians of {ROUNDS} alternating "
            f"{WINDOW:g} s windows, {CONNECTIONS} connections)",
        )
    ]


def _per_call(fn: Any, seconds: float = 1.5) -> float:
    for _ in range(50):
        fn()
    calls, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        for _ in range(50):
            fn()
        calls += 50
    return elapsed / calls


def bench_injector_cost() -> list[Row]:
    raw = CAPTURE.read_text()
    review = json.loads(raw)
    pod = review["request"]["object"]

    def baseline() -> None:
        json.dumps(json.loads(raw))

    def full() -> None:
        decision = review_pod(orjson.loads(raw)["request"], CONFIG)
        orjson.dumps({"response": decision.response})

    def injector_only() -> None:
        inject(pod, CONFIG)

    base = _per_call(baseline)
    whole = _per_call(full)
    core = _per_call(injector_only)
    return [
        Row(
            "decode + inject + encode, vs json.loads+json.dumps",
            whole / base,
            "<= 2",
            f"{whole * 1e6:,.0f} µs vs {base * 1e6:,.0f} µs per review",
        ),
        Row(
            "inject() alone, vs json.loads+json.dumps",
            core / base,
            "-",
            f"{core * 1e6:,.0f} µs per pod (17 ops, 40 976-byte review)",
        ),
    ]
