"""The Workspace controller at scale, against the in-repo Kubernetes API server.

Four figures, each against a baseline measured in the same run:

- creation: N Workspaces to pods through the reconciler (in this process, its default
  workers) against creating the same pods, PVCs, service accounts and credentials Secrets
  directly with 32 requests in flight, both against the same server in this process, which
  answers every request after ``API_LATENCY`` as a real one does (the writes per
  Workspace are reported beside it: fewer writes, not a faster server, is what moves it);
- steady state: reconciles/s and API requests/s of a ``wspin controller`` process holding N
  Pending Workspaces (the baseline is the former 2 s poll: N/2 reconciles/s);
- restart: that process's peak RSS while it lists and first reconciles N Workspaces, their
  pods and PVCs, against the budget of 110 MiB plus 16 KB per Workspace; also the longest
  ``/healthz`` answer meanwhile (an event-loop stall shows there) and the writes it made;
- deletion: log lines the process writes while the namespace of the N Workspaces is deleted
  (warnings separately; the baseline is one line per Workspace, its "workspace deleted").

N is 10,000 (``WSPIN_BENCH_WORKSPACES`` overrides it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from bench.table import Row
from controller.settings import ControllerSettings, RuntimeSettings, WorkspaceSettings
from controller.setup import new_manager
from controller.workspace import wiring
from controller.workspace.pod.builder import desired_pod
from controller.workspace.pod.credential_keys import load_credential_keys
from controller.workspace.pod.credentials import desired_password_secret
from controller.workspace.pod.names import desired_service_account
from controller.workspace.pod.storage import desired_pvc
from tests.controller.workspace.factories import credentials, publish_runtime
from tests.kubeapi import KubeServer
from wspin.core.delivery import AgentdDelivery
from wspin.core.kinds import NAMESPACES, PODS, PVCS, SECRETS, SERVICE_ACCOUNTS, WORKSPACES
from wspin.kube.client import Kube
from wspin.kube.config import new_api_client
from wspin.kube.informer import Informer

COUNT = int(os.environ.get("WSPIN_BENCH_WORKSPACES", "10000"))
DIRECT_IN_FLIGHT = 32
WORKERS = RuntimeSettings().max_concurrent_reconciles
SETTINGS = WorkspaceSettings(
    default_runtime_class="gvisor",
    agentd=AgentdDelivery("ghcr.io/example/agentd@sha256:" + "0123456789abcdef" * 4),
)
FORMER_POLL = 2.0
"""Seconds between the reconciles every Pending Workspace got before it was event-driven."""
BUDGET_MIB = 110 + COUNT * 16 / 1024
STEADY_WINDOW = 10.0
API_LATENCY = 0.015
"""Seconds each request waits at the test API server: the p50 of a real v1.32 API server
under a creation burst, so that overlapping requests pays off as it does on a cluster."""


def _workspace(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": WORKSPACES.api_version,
        "kind": WORKSPACES.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtime": "python", "storage": {"size": "1Gi"}},
    }


async def _in_parallel(count: int, workers: int, job: Callable[[int], Awaitable[None]]) -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            await job(queue.get_nowait())

    await asyncio.gather(*(worker() for _ in range(workers)))


async def _direct(kube: Kube, namespace: str) -> float:
    """The baseline: the same PVCs, service accounts, credentials Secrets and pods, created
    straight away; the pods after the rest (the API server refuses a pod whose service
    account does not exist yet)."""
    first: list[tuple[Any, dict[str, Any]]] = []
    pods: list[tuple[Any, dict[str, Any]]] = []
    for i in range(COUNT):
        ws = _workspace(f"ws{i}", namespace)
        ws["metadata"]["uid"] = str(uuid.uuid4())
        derived = credentials(ws)
        first += [
            (PVCS, desired_pvc(ws)),
            (SERVICE_ACCOUNTS, desired_service_account(ws)),
            (SECRETS, desired_password_secret(ws, derived)),
        ]
        pods.append((PODS, desired_pod(ws, SETTINGS, credentials=derived)))

    started = time.perf_counter()
    for bodies in (first, pods):

        async def create(i: int, bodies: list[tuple[Any, dict[str, Any]]] = bodies) -> None:
            resource, body = bodies[i]
            await kube.create(resource, body, namespace)

        await _in_parallel(len(bodies), DIRECT_IN_FLIGHT, create)
    return time.perf_counter() - started


async def _via_reconciler(
    server: KubeServer, kube: Kube, namespace: str, workers: int = WORKERS
) -> tuple[float, float]:
    """Workspaces stored first; timed from manager start until every pod exists. Also the
    writes per Workspace in its namespace, counted once the reconciles they bring are done
    (the finalizer with the owner-record request, the PVC, service account, Secret and pod,
    one status write)."""
    kind = server.kinds.find(WORKSPACES.group, WORKSPACES.version, WORKSPACES.plural)
    assert kind is not None
    for i in range(COUNT):
        server.store.create(kind, namespace, _workspace(f"ws{i}", namespace))
    pods = Informer(kube, PODS, namespace=namespace)
    all_there = asyncio.Event()
    pods.add_handler(lambda *_: all_there.set() if len(pods) >= COUNT else None)
    watching = asyncio.create_task(pods.run())
    await pods.wait_synced()
    settings = ControllerSettings(
        runtime=RuntimeSettings(
            health_port=0,
            metrics_port=0,
            bind_host="127.0.0.1",
            max_concurrent_reconciles=workers,
        ),
        workspace=SETTINGS,
    )
    await publish_runtime(kube)
    manager = new_manager(kube, settings)
    # The key the restarted `wspin controller` reads too (the same namespace): a controller
    # with another key would replace every pod it finds.
    keys = await load_credential_keys(kube, settings.namespace)
    wiring.register(manager, settings, keys=keys)
    writes = len(server.writes)
    started = time.perf_counter()
    running = asyncio.create_task(manager.run())
    try:
        await all_there.wait()
        elapsed = time.perf_counter() - started
        await _quiet(server, 1.0)  # the status writes and the reconciles they bring
        inside = f"/namespaces/{namespace}/"
        made = sum(1 for write in server.writes[writes:] if inside in write.path)
        return elapsed, made / COUNT
    finally:
        manager.stop()
        await running
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)


async def _quiet(server: KubeServer, seconds: float) -> None:
    seen = -1
    while seen != len(server.requests):
        seen = len(server.requests)
        await asyncio.sleep(seconds)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _proc_status(pid: int, field: str) -> float:
    """A ``/proc/<pid>/status`` memory field in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


_PROBE = """
import http.client, signal, sys, time

port, slowest, ready = int(sys.argv[1]), 0.0, False


def stop(*_):
    print("slowest", slowest, flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
while True:
    for path in ("/healthz", "/readyz"):
        asked = time.perf_counter()
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("GET", path)
            status = connection.getresponse().status
            connection.close()
        except OSError:
            continue  # not listening yet
        if path == "/healthz":
            slowest = max(slowest, time.perf_counter() - asked)
        elif status == 200 and not ready:
            ready = True
            print("ready", time.perf_counter(), flush=True)
    time.sleep(0.02)
"""


class _Prober:
    """Asks ``/healthz`` every 20 ms; records the slowest answer once the server is up and
    when ``/readyz`` first said yes. A stalled event loop answers neither. It runs in a
    process of its own: a thread here would wait for this process's interpreter, busy with
    the API server's 10,000 objects, and count those pauses as the controller's."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, port: int) -> _Prober:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _PROBE, str(port), stdout=asyncio.subprocess.PIPE
        )
        return cls(process)

    async def ready(self) -> float:
        """When ``/readyz`` first answered 200 (``time.perf_counter``: one clock per host)."""
        assert self.process.stdout is not None
        word, at = (await self.process.stdout.readline()).split()
        assert word == b"ready", word
        return float(at)

    async def stop(self) -> float:
        """The slowest ``/healthz`` answer, in seconds."""
        assert self.process.stdout is not None
        self.process.terminate()
        output = await self.process.stdout.read()
        await self.process.wait()
        return float(output.split()[-1])


class _Process:
    """A ``wspin controller`` process and the JSON log lines it writes."""

    def __init__(self, process: asyncio.subprocess.Process, health: int, metrics: int) -> None:
        self.process = process
        self.health = health
        self.metrics = metrics
        self.lines: list[dict[str, Any]] = []
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            with contextlib.suppress(ValueError):
                line = json.loads(raw)
                self.lines.append(line if isinstance(line, dict) else {})

    async def reconciles(self, session: aiohttp.ClientSession) -> float:
        async with session.get(f"http://127.0.0.1:{self.metrics}/metrics") as response:
            text = await response.text()
        total = 0.0
        for line in text.splitlines():
            if (
                line.startswith("wspin_controller_reconcile_total{")
                and 'controller="workspace"' in line
            ):
                total += float(line.rsplit(" ", 1)[1])
        return total

    async def stop(self) -> None:
        self.process.terminate()
        await self.process.wait()
        await self._reader


@contextlib.asynccontextmanager
async def _controller(server: KubeServer) -> AsyncIterator[_Process]:
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "b", "cluster": {"server": server.url}}],
                    "users": [{"name": "b", "user": {"token": "bench"}}],
                    "contexts": [{"name": "b", "context": {"cluster": "b", "user": "b"}}],
                    "current-context": "b",
                }
            )
        )
        health, metrics = _free_port(), _free_port()
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "wspinctl.cli",
            "controller",
            f"--kubeconfig={kubeconfig}",
            f"--health-port={health}",
            f"--metrics-port={metrics}",
            "--default-runtime-class=gvisor",
            # The same settings as the in-process reconciler, or every Workspace would be
            # rewritten (Failed: no agentd image) and the restart would not be a restart.
            f"--agentd-image={SETTINGS.agentd.image if SETTINGS.agentd else ''}",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        controller = _Process(process, health, metrics)
        try:
            yield controller
        finally:
            if process.returncode is None:
                await controller.stop()


async def _restart_and_delete(server: KubeServer, kube: Kube, namespace: str) -> dict[str, float]:
    figures: dict[str, float] = {}
    writes_before = len(server.writes)
    async with _controller(server) as controller, aiohttp.ClientSession() as session:
        started = time.perf_counter()
        # Probed from a process of its own: this one is busy serving the lists, and must
        # not be what the figure measures.
        prober = await _Prober.start(controller.health)
        try:
            ready_at = await prober.ready()
            await _quiet(server, 1.0)  # the first pass over every Workspace is done
        finally:
            slowest = await prober.stop()
        figures["ready_s"] = ready_at - started
        figures["healthz_max_ms"] = slowest * 1000
        figures["restart_writes"] = len(server.writes) - writes_before

        # The first pass reconciles every Workspace without a request: wait until it ends.
        settled, reconciles = -1.0, await controller.reconciles(session)
        while settled != reconciles:
            settled = reconciles
            await asyncio.sleep(1.0)
            reconciles = await controller.reconciles(session)
        figures["first_pass_reconciles"] = reconciles
        figures["peak_mib"] = _proc_status(controller.process.pid, "VmHWM")
        requests = len(server.requests)
        cpu = _cpu_seconds(controller.process.pid)
        await asyncio.sleep(STEADY_WINDOW)
        figures["steady_requests_per_s"] = (len(server.requests) - requests) / STEADY_WINDOW
        figures["steady_reconciles_per_s"] = (
            await controller.reconciles(session) - reconciles
        ) / STEADY_WINDOW
        figures["steady_cpu_pct"] = (
            (_cpu_seconds(controller.process.pid) - cpu) / STEADY_WINDOW * 100
        )

        lines = len(controller.lines)
        deleting = time.perf_counter()
        await kube.delete(NAMESPACES, namespace)
        while await kube.get_or_none(NAMESPACES, namespace) is not None:  # noqa: ASYNC110
            await asyncio.sleep(0.2)
        figures["deletion_s"] = time.perf_counter() - deleting
        await _quiet(server, 1.0)
        during = controller.lines[lines:]
        figures["deletion_lines"] = len(during)
        figures["deletion_warnings"] = sum(
            1 for line in during if str(line.get("level", "")).lower() in ("warning", "error")
        )
        figures["after_deletion_mib"] = _proc_status(controller.process.pid, "VmRSS")
    return figures


async def _run() -> dict[str, float]:
    async with KubeServer(history_limit=4 * COUNT, latency=API_LATENCY) as server:
        configuration = client.Configuration()
        configuration.host = server.url
        async with new_api_client(configuration) as api:
            kube = Kube(api)
            for name in ("bench-direct", "bench-workspaces", ControllerSettings().namespace):
                await kube.create(NAMESPACES, {"metadata": {"name": name}})
            await publish_runtime(kube)  # and the RuntimeClass the pods name
            direct = await _direct(kube, "bench-direct")
            await kube.delete(NAMESPACES, "bench-direct")
            reconciled, writes = await _via_reconciler(server, kube, "bench-workspaces")
            print(
                f"creation: direct {direct:.1f} s, reconciler {reconciled:.1f} s, "
                f"{writes:.2f} writes per Workspace",
                file=sys.stderr,
            )
            figures = await _restart_and_delete(server, kube, "bench-workspaces")
    return {
        "direct_s": direct,
        "reconciled_s": reconciled,
        "creation_writes": writes,
        **figures,
    }


def bench_workspaces() -> list[Row]:
    """The controller at N Workspaces: creation, steady state, restart and deletion."""
    f = asyncio.run(_run())
    n = f"{COUNT:,}"
    return [
        Row(
            f"time for {n} Workspaces to get pods, vs creating their pods, PVCs, SAs and "
            "Secrets directly",
            f["reconciled_s"] / f["direct_s"],
            "≤ 2",
            f"reconciler {f['reconciled_s']:.1f} s ({WORKERS} workers, "
            f"{f['creation_writes']:.2f} writes per Workspace), direct "
            f"{f['direct_s']:.1f} s ({DIRECT_IN_FLIGHT} in flight, 4 writes each)",
        ),
        Row(
            f"steady-state reconciles/s at {n} Pending Workspaces, vs the former 2 s poll",
            f["steady_reconciles_per_s"] / (COUNT / FORMER_POLL),
            "0",
            f"{f['steady_reconciles_per_s']:.2f} reconciles/s vs {COUNT / FORMER_POLL:.0f}; "
            f"{f['steady_requests_per_s']:.2f} API requests/s; "
            f"{f['steady_cpu_pct']:.1f}% of a core",
        ),
        Row(
            f"restart peak RSS with {n} Workspaces, vs 110 MiB + 16 KB per Workspace",
            f["peak_mib"] / BUDGET_MIB,
            "≤ 1",
            f"{f['peak_mib']:.0f} MiB vs {BUDGET_MIB:.0f} MiB; ready in {f['ready_s']:.1f} s, "
            f"{f['restart_writes']:.0f} writes, slowest /healthz {f['healthz_max_ms']:.0f} ms",
        ),
        Row(
            f"log lines while the namespace of {n} Workspaces is deleted, vs one per Workspace",
            f["deletion_lines"] / COUNT,
            "≤ 1",
            f"{f['deletion_lines']:.0f} lines, {f['deletion_warnings']:.0f} warnings, in "
            f"{f['deletion_s']:.1f} s; RSS after {f['after_deletion_mib']:.0f} MiB",
        ),
    ]
