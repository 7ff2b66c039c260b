"""One controller reads the agents of 2,000 Active workspaces: never more requests at once
than its bound, spread over each interval rather than in bursts, and a reconcile only for a
read that changes a Workspace's status (the first reads), none for a steady fleet.

The caches are 2,000 Workspace and pod dicts as the API server returns them; each pod's IP is
its own loopback address, where the stub agentd answers as that pod's agentd. Where the
Workspace reconciler would write the status a read asks for, the test applies the same pure
``agent_status.apply`` to its copy."""

from __future__ import annotations

import asyncio
from collections import Counter

from prometheus_client import CollectorRegistry

from controller.settings import AgentSettings
from controller.types import ObjectKey
from controller.workspace.agent.metrics import AgentMetrics
from controller.workspace.agent.report import AgentReport, apply
from controller.workspace.agent.scheduler import AgentScheduler, Timing
from tests.support.agent_fleet import Cache, address, fleet_member, token
from tests.support.agentd import StubAgentd
from tests.support.clock import FakeClock
from tests.support.waiting import eventually
from tests.support.waker import FakeWaker
from wspin.core.clock import format_time

FLEET = 2000
BOUND = 16
HEALTH, STATUS = 15.0, 60.0


async def test_two_thousand_agents_are_read_within_the_bound_and_spread_over_each_interval() -> (
    None
):
    clock = FakeClock()
    waker = FakeWaker(clock)
    workspaces, pods = Cache(), Cache()
    queued: list[tuple[float, ObjectKey]] = []
    async with StubAgentd(bind_all=True) as stub:
        stub.latency = 0.002
        scheduler = AgentScheduler(
            AgentSettings(
                port=stub.port, concurrency=BOUND, health_interval=HEALTH, status_interval=STATUS
            ),
            workspaces=workspaces,
            pods=pods,
            metrics=AgentMetrics(CollectorRegistry()),
            notify=lambda key: queued.append((waker.now(), key)),
            clock=clock,
            waker=waker,
            timing=Timing(health=5.0, status=5.0),
        )
        started = format_time(clock())
        clock.advance(3600)  # every pod has been Active for an hour: no startup grace
        start = waker.now()
        for index in range(FLEET):
            ws, pod = fleet_member(index, started)
            workspaces.put(ws)
            pods.put(pod)
            await stub.agent(address(index), token=token(index))
            assert scheduler.track(ws, pod, token(index)) is not None

        def reconcile_what_was_queued() -> None:
            """The status write each queued Workspace's reconcile makes."""
            for _, key in queued[written[0] :]:
                ws = workspaces.objects[key]
                status = ws["status"]
                workspaces.write_status(
                    key,
                    apply(
                        status,
                        status,
                        AgentReport(scheduler.view(ws)),
                        "Active",
                        1,
                        format_time(clock()),
                    ),
                )
            written[0] = len(queued)

        written = [0]
        stop = asyncio.Event()
        task = asyncio.create_task(scheduler.run(stop))
        per_second: Counter[int] = Counter()
        status_per_second: Counter[int] = Counter()
        try:
            for second in range(1, 31):
                before = stub.served
                waker.advance(1.0)

                def caught_up() -> bool:
                    due = scheduler.next_due()
                    return scheduler.in_flight == 0 and (due is None or due > waker.now())

                await eventually(caught_up, f"the reads due by second {second}")
                per_second[second] = stub.served - before
                statuses = sum(a.requests("/v1/statusz") for a in stub.agents.values())
                status_per_second[second] = statuses - sum(status_per_second.values())
                reconcile_what_was_queued()
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)

    health_reads = sum(a.requests("/v1/healthz") for a in stub.agents.values())
    status_reads = sum(a.requests("/v1/statusz") for a in stub.agents.values())
    assert health_reads == 2 * FLEET  # each agent twice in 30 s, once per 15 s
    assert FLEET * 30 / STATUS * 0.8 < status_reads < FLEET * 30 / STATUS * 1.2
    # Never more requests at once than the bound, and the bound was used.
    assert BOUND / 2 <= stub.most_in_flight <= BOUND
    # Spread: every second of the interval carries its share, none a burst.
    mean = (health_reads + status_reads) / 30
    assert max(per_second.values()) < 1.6 * mean, per_second
    assert min(per_second.values()) > 0.5 * mean, per_second
    # The statusz bearer is each agent's own; healthz carries none.
    for index in range(FLEET):
        for path, bearer in stub.agents[address(index)].seen:
            assert bearer == ("" if path == "/v1/healthz" else f"Bearer {token(index)}")
    # A reconcile for each first read that changed a Workspace (AgentHealthy, then the deep
    # status), none for the 2,000 identical liveness answers of the second interval: the
    # Workspaces queued then are those whose first deep status was read then (the work queue
    # makes one reconcile of a key queued twice).
    first = {key for when, key in queued if when - start <= HEALTH}
    assert len(first) == FLEET
    late = {key for when, key in queued if when - start > HEALTH}
    late_status_reads = sum(n for second, n in status_per_second.items() if second > HEALTH)
    assert 0 < len(late) <= late_status_reads < FLEET / 2


async def test_a_deadline_moved_later_is_not_read_early_and_a_forgotten_agent_never_again() -> None:
    """The work queue keeps the earliest pending add of a key; the deadline the scheduler
    holds decides whether a read runs when it comes out."""
    clock = FakeClock()
    waker = FakeWaker(clock)
    workspaces, pods = Cache(), Cache()
    async with StubAgentd(bind_all=True) as stub:
        scheduler = AgentScheduler(
            AgentSettings(port=stub.port, health_interval=HEALTH, status_interval=STATUS),
            workspaces=workspaces,
            pods=pods,
            metrics=AgentMetrics(CollectorRegistry()),
            clock=clock,
            waker=waker,
            timing=Timing(health=5.0, status=5.0, drain_poll=10.0),
        )
        started = format_time(clock())
        clock.advance(3600)
        members = [fleet_member(index, started) for index in range(3)]
        for index, (ws, pod) in enumerate(members):
            workspaces.put(ws)
            pods.put(pod)
            await stub.agent(address(index), token=token(index))
            scheduler.track(ws, pod, token(index))
        stop = asyncio.Event()
        task = asyncio.create_task(scheduler.run(stop))

        async def advance(seconds: float) -> None:
            waker.advance(seconds)

            def caught_up() -> bool:
                due = scheduler.next_due()
                return scheduler.in_flight == 0 and (due is None or due > waker.now())

            await eventually(caught_up, "the due reads")

        def statuses(index: int) -> int:
            return stub.agents[address(index)].requests("/v1/statusz")

        try:
            await advance(STATUS)  # every first read done
            drained, forgotten, _ = (ws for ws, _ in members)
            assert scheduler.drain(drained) and statuses(0) == 1
            await advance(0)
            assert statuses(0) == 2  # read at once, then every drain poll
            scheduler.end_drain(drained)  # its next deep status is a status interval away
            await advance(10.0)  # the drain poll's pending add comes out: no read
            assert statuses(0) == 2
            scheduler.forget(forgotten)
            before = stub.agents[address(1)].requests("/v1/healthz") + statuses(1)
            for _ in range(int(2 * STATUS)):
                await advance(1.0)
            assert stub.agents[address(1)].requests("/v1/healthz") + statuses(1) == before
            # Back on the usual period: one read a status interval after the drain's first.
            assert statuses(0) == 4
            assert statuses(2) >= 3
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
