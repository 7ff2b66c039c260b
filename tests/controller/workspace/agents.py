"""A Workspace reconciler with the fleet's agent scheduler, against the Kubernetes API and a
stub agentd on loopback, on a fake clock: a test scripts agentd's answers, moves time with
``advance`` (the scheduler's deadlines fire; nothing sleeps for them) and reconciles whatever
the scheduler queued, as the manager would."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controller.settings import AgentSettings, WorkspaceSettings
from controller.types import ObjectKey
from controller.workspace.agent.metering import Metering
from controller.workspace.agent.metrics import AgentMetrics
from controller.workspace.agent.scheduler import AgentScheduler, Timing
from controller.workspace.pod import ownership
from controller.workspace.pod.builder import desired_pod
from controller.workspace.reconcile.reconciler import WorkspaceReconciler
from controller.workspace.recovery.verify_metrics import VerifyMetrics
from tests.controller.workspace.conftest import SETTINGS, Harness, reconcile_deps
from tests.controller.workspace.conftest import harness as harness
from tests.controller.workspace.factories import (
    create_service_account,
    credentials,
    injected,
    ready_pod_status,
)
from tests.support.agentd import Agent, StubAgentd
from tests.support.clock import FakeClock
from tests.support.waiting import eventually
from tests.support.waker import FakeWaker
from wspin.core.clock import format_time
from wspin.core.kinds import EVENTS, PODS
from wspin.core.objects import Obj

START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
FIRST_READS = 30 + 60
"""Seconds after a pod became Active by which both first reads are due (the startup grace,
then a phase within each interval)."""
TIMING = Timing(health=0.5, status=0.5, drain=0.5, drain_poll=10.0, startup_grace=30.0)
"""The production timing but short request bounds: a hanging agent costs half a second."""

__all__ = ["Agents", "agents", "harness"]


@dataclass
class Agents:
    """The harness, its scheduler and the stub agentd."""

    h: Harness
    stub: StubAgentd
    scheduler: AgentScheduler
    clock: FakeClock
    waker: FakeWaker
    registry: CollectorRegistry
    queued: list[ObjectKey] = field(default_factory=list)

    async def active(self, name: str = "ws1", ip: str = "127.0.0.1", **spec: Any) -> Agent:
        """An Active Workspace whose pod (delivery injected) runs at ``ip``, its agentd
        scripted healthy and demanding the Workspace's admin token."""
        ws = await self.h.apply(name, **spec)
        agent = await self.stub.agent(ip, token=credentials(ws).admin_token)
        await self.inject(name)
        await self.h.reconcile(name)
        pod = await self.h.pod_name(name)
        # Started now, as the kubelet records it.
        await self.h.set_pod_status(
            pod, {**ready_pod_status(ip), "startTime": format_time(self.clock())}
        )
        await self.h.reconcile(name)
        assert (await self.h.workspace(name))["status"]["phase"] == "Active"
        return agent

    async def read_once(self) -> tuple[Agent, str | None]:
        """``active``, then past the first reads of its agent: the agent and the pod's uid."""
        agent = await self.active()
        await self.advance(FIRST_READS)
        return agent, await self.pod_uid()

    async def inject(self, name: str = "ws1") -> str:
        """Play the controller and the admission webhook: create the Workspace's pod, labelled
        as the controller's, with delivery injected."""
        ws = await self.h.workspace(name)
        await create_service_account(self.h.kube, ws)
        pod = injected(ownership.stamp(desired_pod(ws, SETTINGS, credentials=credentials(ws)), ws))
        await self.h.create_account(ws)
        created = await self.h.kube.create(PODS, pod, self.h.namespace)
        await self.h.synced(self.h.pods, created["metadata"]["name"], created)
        return str(created["metadata"]["name"])

    async def settled(self) -> None:
        """Every read due by now has run."""

        def idle() -> bool:
            due = self.scheduler.next_due()
            return self.scheduler.in_flight == 0 and (due is None or due > self.waker.now())

        await eventually(idle, "the agent scheduler to finish its due reads")

    async def advance(self, seconds: float) -> list[ObjectKey]:
        """Move time on, let the due reads run, reconcile what they queued; the keys queued."""
        self.waker.advance(seconds)
        await self.settled()
        queued, self.queued = self.queued, []
        for key in dict.fromkeys(queued):
            await self.h.reconcile(key.name)
        return queued

    def sample(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    async def events(self, reason: str, name: str = "ws1") -> list[Obj]:
        listing = await self.h.kube.list(
            EVENTS, self.h.namespace, fields=f"involvedObject.name={name}"
        )
        return [e for e in listing.get("items") or [] if e.get("reason") == reason]

    async def pod_uid(self, name: str = "ws1") -> str | None:
        pod = await self.h.kube.get_or_none(PODS, await self.h.pod_name(name), self.h.namespace)
        return None if pod is None else str(pod["metadata"]["uid"])


def settings(port: int, **agent: Any) -> WorkspaceSettings:
    from dataclasses import replace

    return replace(SETTINGS, agent=AgentSettings(port=port, **agent))


@pytest.fixture
async def agents(harness: Harness) -> AsyncIterator[Agents]:
    clock = FakeClock(START)
    waker = FakeWaker(clock)
    registry = CollectorRegistry()
    metrics = AgentMetrics(registry)
    metering = Metering(registry)
    harness.workspaces.add_handler(metering.workspace_event)
    async with StubAgentd() as stub:
        found = Agents(harness, stub, None, clock, waker, registry)  # type: ignore[arg-type]
        scheduler = AgentScheduler(
            AgentSettings(port=stub.port),
            workspaces=harness.workspaces,
            pods=harness.pods,
            metrics=metrics,
            metering=metering,
            notify=lambda key: found.queued.append(key),
            clock=clock,
            waker=waker,
            timing=TIMING,
        )
        found.scheduler = scheduler
        harness.reconciler = WorkspaceReconciler(
            reconcile_deps(
                harness.kube,
                harness.workspaces,
                harness.pods,
                harness.pvcs,
                settings(stub.port),
                verify_metrics=VerifyMetrics(registry),
                clock=clock,
                agents=scheduler,
                agent_metrics=metrics,
            )
        )
        stop = asyncio.Event()
        task = asyncio.create_task(scheduler.run(stop))
        try:
            yield found
        finally:
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, 10)
