"""The agent scheduler reading a fleet of 2,000 agents, against an empty request loop.

A stub agentd in a process of its own answers on 2,000 loopback addresses (one per pod). The
baseline, measured in the same run against the same stub, is the cheapest way to make the
same requests: an aiohttp loop with the same connection settings and the same bound on
requests in flight that sends GETs and reads the answers, nothing else. The scheduler runs
in windows of ``SECONDS`` with intervals short enough to keep it saturated (every agent's
liveness once a second, its deep status every four), so both figures are throughputs; the two
alternate for ``ROUNDS`` windows each and their medians are compared:

- agentd reads per second of the scheduler vs requests per second of the loop;
- the controller process's CPU per read (scheduling, the cache checks before each read,
  parsing and bounding the answers, judging them, deciding whether a Workspace's status would
  change) vs the loop's CPU per request.

Then the same offered load (``PACED`` reads a second, below saturation, as a production fleet
runs) over 1,000 and over 10,000 agents, so what grows with the fleet shows: CPU per read and
how late reads start (the scheduler's own lag histogram) at 10,000 vs at 1,000; and the memory
the scheduler holds per tracked agent at 10,000 (targets, deadlines) vs the cached Workspace and
pod it reads them from.

``WSPIN_BENCH_TREE=/path/to/checkout`` also runs the scheduler of another checkout, each
checkout's windows in a child process of its own (``python -m bench.agent_scrapes window …``)
alternating against the same stub, and prints this checkout's CPU per read, lateness and
memory per agent against it: a change's cost, measured in the same run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass

import aiohttp
from prometheus_client import CollectorRegistry

from bench.table import Row
from controller.settings import AgentSettings
from controller.types import ObjectKey
from controller.workspace.agent.metrics import AgentMetrics
from controller.workspace.agent.report import AgentReport, apply
from controller.workspace.agent.scheduler import AgentScheduler, Timing
from tests.support.agent_fleet import Cache, address, fleet_member, token
from wspin.core.clock import format_time, utc_now

FLEET = 2000
CONCURRENCY = 64
SECONDS = 3.0
"""Length of one measured scheduler window."""
ROUNDS = 3
"""Alternating windows of each; the medians are compared (a shared machine's load moves)."""
PACED = 125.0
"""Reads a second offered in the paced runs: liveness every ``n / 100`` s, deep status every
four times that, for ``n`` agents (well below what one core reads, as in production)."""
PACED_SECONDS = 5.0
"""Length of one measured paced window, after a second: within the first liveness interval at
either size, so both windows are made of first reads alike."""


@contextlib.asynccontextmanager
async def _stub() -> AsyncIterator[int]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.agentd_stub", stdout=asyncio.subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        yield int((await process.stdout.readline()).decode())
    finally:
        process.kill()
        await process.wait()


async def _empty_loop(port: int, requests: int) -> tuple[float, float]:
    """(requests/s, CPU seconds per request) of the bare loop."""
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, force_close=True), auto_decompress=False
    )
    slots = asyncio.Semaphore(CONCURRENCY)

    async def one(index: int) -> None:
        async with slots, session.get(f"http://{address(index % FLEET)}:{port}/v1/healthz") as r:
            await r.read()

    try:
        wall, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one(i) for i in range(requests)))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        await session.close()
    return requests / wall, cpu / requests


@dataclass(frozen=True)
class Run:
    rate: float
    """agentd reads per second."""
    cpu: float
    """CPU seconds per read."""
    most: int
    """Most reads in flight at once."""
    lag: float
    """Mean seconds a read started after its deadline."""


async def _scheduler(
    port: int,
    fleet: int = FLEET,
    health: float = 1.0,
    warm: float = 5.0,
    seconds: float = SECONDS,
    write: bool = True,
) -> Run:
    """One window of the scheduler over ``fleet`` agents, after ``warm`` seconds; ``write``:
    make the status writes the reconciles it queues would make."""
    workspaces, pods = Cache(), Cache()
    registry = CollectorRegistry()
    metrics = AgentMetrics(registry)
    queued: list[ObjectKey] = []
    scheduler = AgentScheduler(
        AgentSettings(
            port=port, concurrency=CONCURRENCY, health_interval=health, status_interval=4 * health
        ),
        workspaces=workspaces,
        pods=pods,
        metrics=metrics,
        notify=queued.append,
        timing=Timing(startup_grace=0.0),
    )
    started = format_time(utc_now())
    for index in range(fleet):
        ws, pod = fleet_member(index, started)
        workspaces.put(ws)
        pods.put(pod)
        scheduler.track(ws, pod, token(index))

    def reads() -> float:
        return sum(
            registry.get_sample_value(
                "llmsafespaces_workspace_health_checks_total", {"endpoint": endpoint}
            )
            or 0.0
            for endpoint in ("healthz", "statusz")
        )

    def lag() -> tuple[float, float]:
        name = "llmsafespaces_workspace_agent_scrape_lag_seconds"
        return (
            registry.get_sample_value(f"{name}_sum") or 0.0,
            registry.get_sample_value(f"{name}_count") or 0.0,
        )

    most = 0

    async def reconcile_and_watch() -> None:
        """The status writes the queued reconciles would make (the first reads only)."""
        nonlocal most
        while True:
            while queued and write:
                key = queued.pop()
                ws = workspaces.objects[key]
                status, report = ws["status"], AgentReport(scheduler.view(ws))
                now = format_time(utc_now())
                workspaces.write_status(key, apply(status, status, report, "Active", 1, now))
            most = max(most, scheduler.in_flight)
            await asyncio.sleep(0.01)

    stop = asyncio.Event()
    run = asyncio.create_task(scheduler.run(stop))
    watcher = asyncio.create_task(reconcile_and_watch())
    try:
        await asyncio.sleep(warm)  # past the first reads of every agent: a steady fleet
        done, cpu, wall, late = reads(), time.process_time(), time.perf_counter(), lag()
        await asyncio.sleep(seconds)
        done, cpu, wall = reads() - done, time.process_time() - cpu, time.perf_counter() - wall
        late = (lag()[0] - late[0], lag()[1] - late[1])
    finally:
        stop.set()
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        await run
    return Run(done / wall, cpu / max(done, 1.0), most, late[0] / max(late[1], 1.0))


def _paced_health(fleet: int) -> float:
    """The liveness interval that offers ``PACED`` reads a second over ``fleet`` agents."""
    return fleet * (1 + 1 / 4) / PACED


async def _paced(port: int, fleet: int) -> Run:
    """A window at ``PACED`` reads a second over ``fleet`` agents; the Workspaces' statuses
    are left as they were, so every read costs the same look at the status at any size."""
    return await _scheduler(
        port, fleet, _paced_health(fleet), warm=1.0, seconds=PACED_SECONDS, write=False
    )


async def _held_per_agent(fleet: int) -> tuple[float, float]:
    """(bytes the scheduler holds per tracked agent, bytes of its cached Workspace and pod)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        workspaces, pods = Cache(), Cache()
        members = [fleet_member(index, format_time(utc_now())) for index in range(fleet)]
        for ws, pod in members:
            workspaces.put(ws)
            pods.put(pod)
        cached = tracemalloc.get_traced_memory()[0] - before
        scheduler = AgentScheduler(
            AgentSettings(port=1),
            workspaces=workspaces,
            pods=pods,
            metrics=AgentMetrics(CollectorRegistry()),
            timing=Timing(startup_grace=0.0),
        )
        before = tracemalloc.get_traced_memory()[0]
        for index, (ws, pod) in enumerate(members):
            scheduler.track(ws, pod, token(index))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return held / fleet, cached / fleet


async def _measure() -> list[Row]:
    loops: list[tuple[float, float]] = []
    runs: list[Run] = []
    small: list[Run] = []
    large: list[Run] = []
    async with _stub() as port:
        await _empty_loop(port, 2000)  # warm both sides
        for _ in range(ROUNDS):
            loops.append(await _empty_loop(port, 4000))
            runs.append(await _scheduler(port))
        for _ in range(2):
            small.append(await _paced(port, 1000))
            large.append(await _paced(port, 10000))
    loop_rate = statistics.median(rate for rate, _ in loops)
    loop_cpu = statistics.median(cpu for _, cpu in loops)
    rate = statistics.median(run.rate for run in runs)
    cpu = statistics.median(run.cpu for run in runs)
    most = max(run.most for run in runs)
    small_cpu = statistics.median(run.cpu for run in small)
    large_cpu = statistics.median(run.cpu for run in large)
    small_lag = statistics.median(run.lag for run in small)
    large_lag = statistics.median(run.lag for run in large)
    held, cached = await _held_per_agent(10000)
    return [
        Row(
            f"agentd reads/s, one scheduler over {FLEET} agents ({CONCURRENCY} at once) vs an "
            "empty request loop",
            rate / loop_rate,
            "-",
            f"{rate:,.0f}/s vs {loop_rate:,.0f}/s; at most {most} in flight",
        ),
        Row(
            "controller CPU per agentd read vs the empty loop's per request",
            cpu / loop_cpu,
            "<= 2",
            f"{cpu * 1e6:,.0f} µs vs {loop_cpu * 1e6:,.0f} µs",
        ),
        Row(
            f"controller CPU per agentd read, {PACED:.0f} reads/s over 10,000 agents vs 1,000",
            large_cpu / small_cpu,
            "<= 1.5",
            f"{large_cpu * 1e6:,.0f} µs vs {small_cpu * 1e6:,.0f} µs; reads/s "
            f"{statistics.median(r.rate for r in large):,.0f} vs "
            f"{statistics.median(r.rate for r in small):,.0f}",
        ),
        Row(
            f"mean lateness of a read's start, {PACED:.0f} reads/s over 10,000 agents vs 1,000",
            large_lag / max(small_lag, 1e-6),
            "-",
            f"{large_lag * 1e3:,.2f} ms vs {small_lag * 1e3:,.2f} ms",
        ),
        Row(
            "memory the scheduler holds per tracked agent (10,000) vs its cached Workspace+pod",
            held / cached,
            "-",
            f"{held:,.0f} B vs {cached:,.0f} B",
        ),
    ]


async def _child(tree: str, *argv: object) -> dict[str, float]:
    """One measurement by ``tree``'s own bench in a child process: its JSON answer."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.agent_scrapes",
        *(str(arg) for arg in argv),
        cwd=tree,
        env={**os.environ, "PYTHONPATH": tree},
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the bench of {tree} failed ({process.returncode})")
    answer: dict[str, float] = json.loads(out.decode().strip().splitlines()[-1])
    return answer


async def _against(other: str) -> list[Row]:
    """This checkout's scheduler against ``other``'s, in alternating child processes."""
    trees = {"this": os.getcwd(), "other": other}
    saturated: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    paced: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    async with _stub() as port:
        await _empty_loop(port, 2000)
        for _ in range(ROUNDS):
            for name, tree in trees.items():
                saturated[name].append(await _child(tree, "window", port, FLEET, 1.0, 5.0, SECONDS))
                paced[name].append(
                    await _child(tree, "window", port, 10000, _paced_health(10000), 1.0, 5.0, 0)
                )
    held = {name: (await _child(tree, "held", 10000))["held"] for name, tree in trees.items()}

    def median(runs: dict[str, list[dict[str, float]]], name: str, field: str) -> float:
        return statistics.median(run[field] for run in runs[name])

    rows = []
    for what, runs in (
        (f"saturated, {FLEET} agents", saturated),
        (f"{PACED:.0f} reads/s over 10,000 agents", paced),
    ):
        this, that = median(runs, "this", "cpu"), median(runs, "other", "cpu")
        rows.append(
            Row(
                f"controller CPU per agentd read, {what}, this checkout vs $WSPIN_BENCH_TREE",
                this / that,
                "<= 1.05",
                f"{this * 1e6:,.0f} µs vs {that * 1e6:,.0f} µs; reads/s "
                f"{median(runs, 'this', 'rate'):,.0f} vs {median(runs, 'other', 'rate'):,.0f}",
            )
        )
    this, that = median(paced, "this", "lag"), median(paced, "other", "lag")
    rows.append(
        Row(
            f"mean lateness of a read's start, {PACED:.0f} reads/s over 10,000 agents, this "
            "checkout vs $WSPIN_BENCH_TREE",
            this / max(that, 1e-6),
            "-",
            f"{this * 1e3:,.2f} ms vs {that * 1e3:,.2f} ms",
        )
    )
    rows.append(
        Row(
            "memory the scheduler holds per tracked agent (10,000), this checkout vs "
            "$WSPIN_BENCH_TREE",
            held["this"] / held["other"],
            "<= 1.05",
            f"{held['this']:,.0f} B vs {held['other']:,.0f} B",
        )
    )
    return rows


def bench_agent_scrapes() -> list[Row]:
    rows = asyncio.run(_measure())
    other = os.environ.get("WSPIN_BENCH_TREE")
    if other:
        rows += asyncio.run(_against(other))
    return rows


def _main(argv: list[str]) -> None:
    """``window PORT FLEET HEALTH WARM SECONDS [WRITE]`` or ``held FLEET``: one measurement,
    as JSON on the last line of stdout."""
    if argv[0] == "window":
        port, fleet = int(argv[1]), int(argv[2])
        health, warm, seconds = float(argv[3]), float(argv[4]), float(argv[5])
        write = len(argv) < 7 or argv[6] != "0"
        run = asyncio.run(_scheduler(port, fleet, health, warm, seconds, write))
        print(json.dumps(asdict(run)))
    elif argv[0] == "held":
        held, cached = asyncio.run(_held_per_agent(int(argv[1])))
        print(json.dumps({"held": held, "cached": cached}))
    else:
        raise SystemExit(f"unknown measurement {argv[0]!r}")


if __name__ == "__main__":
    _main(sys.argv[1:])
