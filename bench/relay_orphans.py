"""One orphan sweep over 10,000 relay VMs in the in-process fake cloud.

The baseline is merely listing the same 10,000 VMs, measured in the same run: the ratio
says what the sweep's classification, evidence logging and destroys cost on top of the
listing it cannot avoid. The CR lists come from memory, so the API server is not measured.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from prometheus_client import CollectorRegistry

from bench.table import Row
from controller.relay.drivers.fake import FakeCloud
from controller.relay.identity import ClusterIdentity
from controller.relay.metrics import RelayMetrics
from controller.relay.orphans import OrphanDetector, OrphanPolicy
from tests.support.clock import FakeClock
from wspin.core.kinds import Resource

VMS = 10_000
RELAYS = 100
ORPHANS = 50
LEGACY = 50
REGION = "us-east-1"
CLUSTER = "bench-cluster"
ROUNDS = 5


class _Relays:
    """The CR list the sweep reads twice, served from memory."""

    def __init__(self, uids: list[str]) -> None:
        self.items = [
            {"metadata": {"name": f"fleet-{n}", "uid": uid},
             "spec": {"providers": [{"provider": "aws", "region": REGION}]}}
            for n, uid in enumerate(uids)
        ]  # fmt: skip

    async def list(self, res: Resource, namespace: str | None = None) -> dict[str, Any]:
        return {"items": self.items}


def _cloud(clock: FakeClock) -> tuple[FakeCloud, list[str]]:
    cloud = FakeCloud(provider="aws", clock=clock)
    uids = [f"uid-{n}" for n in range(RELAYS)]
    owned = VMS - ORPHANS - LEGACY
    for n in range(owned):
        cloud.seed(
            REGION, cluster=CLUSTER, owner_uid=uids[n % RELAYS], provider="aws", age_seconds=7200
        )
    for n in range(ORPHANS):
        cloud.seed(REGION, cluster=CLUSTER, owner_uid=f"gone-{n}", provider="aws", age_seconds=7200)
    for _ in range(LEGACY):
        cloud.seed(REGION, age_seconds=7200)
    return cloud, uids


async def _measure() -> tuple[float, float, int]:
    best_list = best_sweep = float("inf")
    destroyed = 0
    for _ in range(ROUNDS):
        clock = FakeClock()
        cloud, uids = _cloud(clock)
        started = time.perf_counter()
        listed = await cloud.list({}, [REGION])
        best_list = min(best_list, time.perf_counter() - started)
        assert len(listed) == VMS
        detector = OrphanDetector(
            _Relays(uids),
            {"aws": cloud},
            RelayMetrics(CollectorRegistry()),
            ClusterIdentity(None, CLUSTER),
            policy=OrphanPolicy(grace_seconds=600, max_deletions=VMS),
            clock=clock,
        )
        started = time.perf_counter()
        result = await detector.sweep()
        best_sweep = min(best_sweep, time.perf_counter() - started)
        destroyed = len(result.destroyed)
    return best_list, best_sweep, destroyed


def bench_orphan_sweep() -> list[Row]:
    # The sweep logs one evidence line per destroy; keep them out of the printed table.
    logging.getLogger("controller.relay").setLevel(logging.ERROR)
    listing, sweep, destroyed = asyncio.run(_measure())
    per_vm_us = sweep / VMS * 1e6
    return [
        Row(
            f"orphan sweep over {VMS} fake VMs, vs listing them",
            sweep / listing,
            "<= 3",
            f"{per_vm_us:.2f} us per VM, sweep {sweep * 1e3:.1f} ms, list {listing * 1e3:.1f} ms, "
            f"{destroyed} orphans destroyed",
        )
    ]


if __name__ == "__main__":
    from bench.table import render

    print(render(bench_orphan_sweep()))
