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
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import sys
import time
from collections.abc import AsyncIterator

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


async def _scheduler(port: int) -> tuple[float, float, int]:
    """(reads/s, CPU seconds per read, most reads in flight) of the scheduler."""
    workspaces, pods = Cache(), Cache()
    registry = CollectorRegistry()
    metrics = AgentMetrics(registry)
    queued: list[ObjectKey] = []
    scheduler = AgentScheduler(
        AgentSettings(port=port, concurrency=CONCURRENCY, health_interval=1.0, status_interval=4.0),
        workspaces=workspaces,
        pods=pods,
        metrics=metrics,
        notify=queued.append,
        timing=Timing(startup_grace=0.0),
    )
    started = format_time(utc_now())
    for index in range(FLEET):
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

    most = 0

    async def reconcile_and_watch() -> None:
        """The status writes the queued reconciles would make (the first reads only)."""
        nonlocal most
        while True:
            while queued:
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
        await asyncio.sleep(5.0)  # past the first reads of every agent: a steady fleet
        done, cpu, wall = reads(), time.process_time(), time.perf_counter()
        await asyncio.sleep(SECONDS)
        done, cpu, wall = reads() - done, time.process_time() - cpu, time.perf_counter() - wall
    finally:
        stop.set()
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        await run
    return done / wall, cpu / max(done, 1.0), most


async def _measure() -> list[Row]:
    loops: list[tuple[float, float]] = []
    runs: list[tuple[float, float, int]] = []
    async with _stub() as port:
        await _empty_loop(port, 2000)  # warm both sides
        for _ in range(ROUNDS):
            loops.append(await _empty_loop(port, 4000))
            runs.append(await _scheduler(port))
    loop_rate = statistics.median(rate for rate, _ in loops)
    loop_cpu = statistics.median(cpu for _, cpu in loops)
    rate = statistics.median(rate for rate, _, _ in runs)
    cpu = statistics.median(cpu for _, cpu, _ in runs)
    most = max(most for _, _, most in runs)
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
    ]


def bench_agent_scrapes() -> list[Row]:
    return asyncio.run(_measure())
