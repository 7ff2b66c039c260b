"""Admission CPU per review and throughput of the real ``wspin webhook`` process, its memory,
and the injector's in-process cost.

The server runs pinned to core 0 and Debian's ``wrk`` drives it from core 1, sending a
captured AdmissionReview as the API server does. Each server's CPU time (user + system, from
/proc) over a window, divided by the reviews answered in it, is its CPU per review: a figure
the rest of the machine's load moves far less than reviews/s. It is measured on one keep-alive
TLS connection, so every review pays its own read, write and turn of the event loop as an API
server's call does, and reviews/s on 16. The baselines are measured the same way in the same
run, in short windows alternating between the servers (``bench/bare.py``): the bare
aiohttp+orjson floor, the bare asyncio+httptools+orjson floor, wspin's HTTP server answering
with the floors' endpoint (what wspin's HTTP layer costs, and so what is left for decoding,
injecting, metrics and the log line), and wspin's own endpoints on aiohttp's public low-level
server (the stack wspin's HTTP server was chosen against). wspin's webhook is also sent the
capture without the workspace pod's labels: everything but the injection and its patched
answer, so the two lanes' difference is what the injection costs inside the server. The
webhook runs exactly as deployed (its own start-up, GC tuning and the one JSON log line per
decision, written to a file), not as an app inside the bench.

``WSPIN_BENCH_TREE=/path/to/checkout`` also runs the webhook of another checkout in the same
windows, and prints this checkout's CPU per review against it: a change's cost, measured
against the same floors in the same run.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench.table import Row
from certs.build import issue_serving, new_ca, service_dns_names
from certs.files import write_certificates
from tests.fixtures import ADMISSION
from webhook.admission import review_pod
from webhook.demo import DEMO_CONFIG
from webhook.envelope import decode_review
from webhook.inject import inject
from webhook.server import tune_gc_for_admission
from wspin.core.workspace_pod import SELECTOR_LABELS

CAPTURE = ADMISSION / "pod-create-many-containers.json"
CAPTURES = (
    ("workspace pod", ADMISSION / "pod-create-workspace.json", 0.85),
    ("many-containers pod", CAPTURE, 0.92),
)
CONFIG = DEMO_CONFIG
CONNECTIONS = 16
"""Connections of the reviews/s windows."""
CPU_CONNECTIONS = 1
"""Connections of the CPU-per-review windows."""
CPU_GOALS = {"bare": 0.85, "httptools": 1.15}
"""CPU per review of wspin's webhook against each floor, at most."""
WINDOW = 3
ROUNDS = 5
SOAK_REVIEWS = 300_000
SERVER_CORE, CLIENT_CORE = 0, 1

_PINS = [
    f"--agentd-image={CONFIG.agentd.image}",
    f"--agentd-binary-sha256-amd64={CONFIG.agentd.pins.amd64}",
    f"--agentd-binary-sha256-arm64={CONFIG.agentd.pins.arm64}",
    f"--opencode-image={CONFIG.opencode.image}",
    f"--opencode-binary-sha256-amd64={CONFIG.opencode.pins.amd64}",
    f"--opencode-binary-sha256-arm64={CONFIG.opencode.pins.arm64}",
]

_WRK_SCRIPT = """
local f = assert(io.open(os.getenv("WSPIN_BENCH_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["User-Agent"] = "kube-apiserver-admission"
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _pinned(core: int) -> Any:
    return lambda: os.sched_setaffinity(0, {core})


def _environment(tree: str | None = None) -> dict[str, str]:
    drop = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("WSPIN_")}
    if tree:
        env["PYTHONPATH"] = tree
    return env


class _Server:
    """One server process on ``SERVER_CORE``, reachable on ``port``."""

    def __init__(self, argv: list[str], port: int, log: Path, tree: str | None = None) -> None:
        self.port = port
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            argv,
            env=_environment(tree),
            cwd=tree,
            stdout=self._log,
            stderr=self._log,
            preexec_fn=_pinned(SERVER_CORE),
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.05)

    def rss_mib(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        kib = re.search(r"^VmRSS:\s+(\d+)", status, re.MULTILINE)
        assert kib is not None
        return int(kib.group(1)) / 1024

    def cpu_seconds(self) -> float:
        """User plus system CPU time so far."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


def _wrk(
    port: int, body: Path, script: Path, seconds: float, connections: int = CONNECTIONS
) -> tuple[float, int]:
    """Requests/s and the number of requests, from ``wrk`` on ``CLIENT_CORE``."""
    out = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{seconds:g}s",
            "-s",
            str(script),
            f"https://127.0.0.1:{port}/mutate-pods?timeout=10s",
        ],
        env={**os.environ, "WSPIN_BENCH_BODY": str(body)},
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=_pinned(CLIENT_CORE),
    ).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"the server answered errors:\n{out}")
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    count = re.search(r"(\d+) requests in", out)
    assert rate is not None and count is not None, out
    return float(rate.group(1)), int(count.group(1))


def _window(server: _Server, body: Path, script: Path, connections: int) -> tuple[float, float]:
    """(reviews/s, CPU seconds per review) over one ``wrk`` window."""
    before = server.cpu_seconds()
    rate, count = _wrk(server.port, body, script, WINDOW, connections)
    return rate, (server.cpu_seconds() - before) / count


def _medians(
    lanes: dict[str, tuple[_Server, Path]], script: Path, connections: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Median reviews/s and CPU per review of each lane (a server and the body it is sent),
    over ``ROUNDS`` alternating windows."""
    rates: dict[str, list[float]] = {lane: [] for lane in lanes}
    cpu: dict[str, list[float]] = {lane: [] for lane in lanes}
    for _ in range(ROUNDS):
        for lane, (server, body) in lanes.items():
            reviews_per_second, per_review = _window(server, body, script, connections)
            rates[lane].append(reviews_per_second)
            cpu[lane].append(per_review)
    return (
        {lane: statistics.median(values) for lane, values in rates.items()},
        {lane: statistics.median(values) for lane, values in cpu.items()},
    )


UNLABELLED = "unlabelled"
"""The lane that sends wspin's webhook the capture with the workspace pod's selector labels
removed: the same bytes to read, decode and check, answered "allowed" without an injection,
so the difference to the capture itself is what injecting and the patched answer cost."""
FLOORS = {
    "bare": "bare aiohttp+orjson",
    "httptools": "bare asyncio+httptools+orjson",
    "wspin-http": "floors' endpoint on wspin's HTTP server",
    "aiohttp-server": "wspin's endpoints on aiohttp's low-level server",
    UNLABELLED: "wspin's webhook, the same review without the workspace labels",
}


def _unlabelled(body: Path) -> Path:
    """``body`` with the pod's selector labels removed, beside it."""
    review = json.loads(body.read_text())
    labels = review["request"]["object"]["metadata"]["labels"]
    for key in SELECTOR_LABELS:
        labels.pop(key)
    unlabelled = body.with_name(f"unlabelled-{body.name}")
    unlabelled.write_text(json.dumps(review, separators=(",", ":")))
    return unlabelled


def _start_all(work: Path) -> dict[str, _Server]:
    now = datetime.datetime.now(datetime.UTC)
    ca = new_ca(now)
    write_certificates(
        work, ca, issue_serving(ca, service_dns_names("wspin-webhook", "wspin-system"), now)
    )
    cert, key = str(work / "tls.crt"), str(work / "tls.key")
    servers: dict[str, _Server] = {}
    for name, mode in (
        ("bare", "aiohttp"),
        ("httptools", "httptools"),
        ("wspin-http", "wspin-http"),
    ):
        port = _free_port()
        argv = [sys.executable, "-m", "bench.bare", mode, str(port), cert, key]
        servers[name] = _Server(argv, port, work / f"{name}.log")
    port = _free_port()
    argv = [sys.executable, "-m", "bench.bare", "aiohttp-server", str(port), cert, key]
    servers["aiohttp-server"] = _Server(argv, port, work / "aiohttp-server.log")
    other = os.environ.get("WSPIN_BENCH_TREE")
    for name, tree in (("wspin", None), ("other", other)):
        if name == "other" and not other:
            continue
        port = _free_port()
        argv = [sys.executable, "-m", "wspinctl.cli", "webhook", *_PINS, "--host", "127.0.0.1"]
        argv += ["--port", str(port), "--metrics-port", "0", "--shutdown-delay", "0"]
        argv += ["--tls-cert-file", cert, "--tls-key-file", key]
        servers[name] = _Server(argv, port, work / f"{name}.log", tree)
    return servers


def bench_admission_throughput() -> list[Row]:
    """CPU per review and reviews/s of both captures against the floors, then idle RSS and
    RSS growth."""
    if shutil.which("wrk") is None or len(os.sched_getaffinity(0)) < 2:
        raise RuntimeError("needs wrk (apt-get install wrk) and two cores")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        script = work / "post.lua"
        script.write_text(_WRK_SCRIPT)
        servers = _start_all(work)
        try:
            time.sleep(1)
            idle = {mode: server.rss_mib() for mode, server in servers.items()}
            for label, capture, goal in CAPTURES:
                body = work / capture.name
                compact = json.dumps(json.loads(capture.read_text()), separators=(",", ":"))
                body.write_text(compact)
                rows.extend(_capture_rows(label, len(compact), goal, servers, body, script))
            rows.extend(_memory_rows(servers["wspin"], idle, work, script))
        finally:
            for server in servers.values():
                server.stop()
    return rows


def _capture_rows(
    label: str, size: int, goal: float, servers: dict[str, _Server], body: Path, script: Path
) -> list[Row]:
    for server in servers.values():  # warm-up: first TLS sessions, caches
        _wrk(server.port, body, script, 1)
    lanes = {mode: (server, body) for mode, server in servers.items()}
    lanes[UNLABELLED] = (servers["wspin"], _unlabelled(body))
    _, per = _medians(lanes, script, CPU_CONNECTIONS)
    throughput = {mode: lanes[mode] for mode in ("bare", "httptools", "aiohttp-server", "wspin")}
    rate, _ = _medians(throughput, script, CONNECTIONS)
    what = f"{label} ({size / 1000:.0f} KB)"
    how = f"medians of {ROUNDS} alternating {WINDOW} s wrk windows, {CPU_CONNECTIONS} connection"
    rows = [
        Row(
            f"admission CPU per review, {what}, one connection, vs the {FLOORS[floor]} floor",
            per["wspin"] / per[floor],
            f"<= {CPU_GOALS[floor]:g}",
            f"wspin {per['wspin'] * 1e6:,.0f} µs, floor {per[floor] * 1e6:,.0f} µs ({how})",
        )
        for floor in ("bare", "httptools")
    ]
    endpoint = (per["wspin"] - per["wspin-http"]) * 1e6
    rows.append(
        Row(
            f"admission CPU per review, {what}, one connection, {FLOORS['wspin-http']} vs the "
            f"{FLOORS['httptools']} floor",
            per["wspin-http"] / per["httptools"],
            "-",
            f"{per['wspin-http'] * 1e6:,.0f} µs vs {per['httptools'] * 1e6:,.0f} µs: wspin's HTTP "
            f"layer; wspin's endpoint costs {abs(endpoint):,.0f} µs "
            f"{'more' if endpoint >= 0 else 'less'} than the floors' one",
        )
    )
    rows.append(
        Row(
            f"admission CPU per review, {what}, one connection, {FLOORS[UNLABELLED]} vs the "
            f"{FLOORS['httptools']} floor",
            per[UNLABELLED] / per["httptools"],
            "-",
            f"{per[UNLABELLED] * 1e6:,.0f} µs vs {per['httptools'] * 1e6:,.0f} µs: the "
            f"injection and its patched answer cost "
            f"{(per['wspin'] - per[UNLABELLED]) * 1e6:,.0f} µs of wspin's "
            f"{per['wspin'] * 1e6:,.0f}",
        )
    )
    rows.append(
        Row(
            f"admission CPU per review, {what}, {FLOORS['aiohttp-server']} vs wspin's server",
            per["aiohttp-server"] / per["wspin"],
            "> 1",
            f"{per['aiohttp-server'] * 1e6:,.0f} µs vs {per['wspin'] * 1e6:,.0f} µs",
        )
    )
    if "other" in per:
        rows.append(
            Row(
                f"admission CPU per review, {what}, this checkout vs $WSPIN_BENCH_TREE",
                per["wspin"] / per["other"],
                "<= 1.05",
                f"{per['wspin'] * 1e6:,.0f} µs vs {per['other'] * 1e6:,.0f} µs",
            )
        )
    rows.append(
        Row(
            f"HTTPS reviews/s, {what}, {CONNECTIONS} connections, vs the {FLOORS['bare']} floor",
            rate["wspin"] / rate["bare"],
            f">= {goal:g}",
            f"wspin {rate['wspin']:,.0f}/s, floor {rate['bare']:,.0f}/s, httptools floor "
            f"{rate['httptools']:,.0f}/s, aiohttp low-level {rate['aiohttp-server']:,.0f}/s",
        )
    )
    return rows


def _memory_rows(wspin: _Server, idle: dict[str, float], work: Path, script: Path) -> list[Row]:
    body = work / "pod-create-workspace.json"
    before = wspin.rss_mib()
    served = 0
    while served < SOAK_REVIEWS:
        served += _wrk(wspin.port, body, script, 10)[1]
    after = wspin.rss_mib()
    return [
        Row(
            "idle RSS of wspin webhook, vs the bare floor's",
            idle["wspin"] / idle["bare"],
            "<= 60 MiB",
            f"wspin {idle['wspin']:.1f} MiB, bare {idle['bare']:.1f} MiB",
        ),
        Row(
            f"RSS growth over {served:,} reviews, vs the 5 MiB budget",
            (after - before) / 5,
            "<= 1",
            f"{before:.1f} MiB after warm-up → {after:.1f} MiB",
        ),
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
    """In-process cost of one review of each capture, after the server's own GC tuning."""
    tune_gc_for_admission()
    rows: list[Row] = []
    for label, capture, _ in CAPTURES:
        rows.extend(_injector_rows(label, capture))
    return rows


def _injector_rows(label: str, capture: Path) -> list[Row]:
    raw = capture.read_text()
    body = raw.encode()
    review = json.loads(raw)
    pod = review["request"]["object"]

    def baseline() -> None:
        json.dumps(json.loads(raw))

    def full() -> None:
        decision = review_pod(decode_review(body)["request"], CONFIG)
        orjson.dumps({"response": decision.response})

    def injector_only() -> None:
        inject(pod, CONFIG)

    base = _per_call(baseline)
    whole = _per_call(full)
    core = _per_call(injector_only)
    return [
        Row(
            f"decode + inject + encode, {label}, vs json.loads+json.dumps",
            whole / base,
            "<= 2",
            f"{whole * 1e6:,.0f} µs vs {base * 1e6:,.0f} µs per review",
        ),
        Row(
            f"inject() alone, {label}, vs json.loads+json.dumps",
            core / base,
            "-",
            f"{core * 1e6:,.1f} µs per pod ({len(inject(pod, CONFIG).patch)} ops, "
            f"{len(json.dumps(review, separators=(',', ':'))):,}-byte review)",
        ),
    ]
