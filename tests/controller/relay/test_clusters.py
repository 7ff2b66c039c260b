"""Two clusters sharing one cloud account: neither ever destroys the other's relay VMs.

Cluster A runs on the test API server (or a real cluster), cluster B on a second in-process
API server, so neither can see the other's InferenceRelays, exactly as two real clusters. Each
controller takes its cluster id from its own kube-system namespace. Both use the same fake
clouds, and both sweep for orphans long after the grace.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry

from controller.relay.drivers.fake import FakeCloud
from controller.relay.identity import ClusterIdentity
from controller.relay.metrics import RelayMetrics
from controller.relay.orphans import OrphanDetector, OrphanPolicy
from tests.controller.fakerouter import FakeRouterState
from tests.controller.relay.conftest import AWS_SLOT, OCI_SLOT, Fleet, build_fleet
from tests.kubeapi import KubeServer
from tests.support.clock import FakeClock
from wspin.core.kinds import INFERENCE_RELAYS, NAMESPACES
from wspin.kube.client import Kube


@pytest.fixture
async def other_cluster() -> AsyncIterator[Kube]:
    async with KubeServer() as server:
        configuration = client.Configuration()
        configuration.host = server.url
        api = client.ApiClient(configuration)
        try:
            yield Kube(api)
        finally:
            await api.close()


def _detector(fleet: Fleet, metrics: RelayMetrics) -> OrphanDetector:
    return OrphanDetector(
        fleet.kube,
        fleet.deps.drivers,
        metrics,
        fleet.deps.cluster,
        policy=OrphanPolicy(grace_seconds=600),
        regions={"aws": ["us-east-1"], "oci": ["us-ashburn-1"]},
        clock=fleet.clock,
    )


async def test_two_clusters_in_one_cloud_never_destroy_each_others_vms(
    kube: Kube,
    namespace: str,
    other_cluster: Kube,
    clock: FakeClock,
    aws: FakeCloud,
    oci: FakeCloud,
    router: tuple[FakeRouterState, str],
    metrics: RelayMetrics,
) -> None:
    await other_cluster.create(NAMESPACES, {"metadata": {"name": namespace}})
    clouds = {"aws": aws, "oci": oci}
    a = build_fleet(kube, namespace, clock, clouds, router, metrics, cluster=ClusterIdentity(kube))
    b = build_fleet(
        other_cluster, namespace, clock, clouds, router, RelayMetrics(CollectorRegistry()),
        cluster=ClusterIdentity(other_cluster),
    )  # fmt: skip
    assert await a.deps.cluster.resolve() != await b.deps.cluster.resolve()
    await a.create(AWS_SLOT, OCI_SLOT)
    await b.create(AWS_SLOT, OCI_SLOT)
    await a.reconcile()
    await b.reconcile()
    a_vms = {i["id"] for i in await a.instances()}
    b_vms = {i["id"] for i in await b.instances()}
    assert len(a_vms) == len(b_vms) == 2 and not a_vms & b_vms
    legacy = aws.seed("us-east-1", owner_uid="uid-of-an-old-release", age_seconds=7200)
    try:
        for _ in range(3):
            clock.advance(3600)
            for fleet in (a, b):
                for vm in a_vms | b_vms:
                    fleet.report(vm, healthy=True)
                await fleet.reconcile()
                swept = await _detector(fleet, metrics).sweep()
                assert swept.destroyed == [] and swept.failed == []
                assert swept.unclaimed == [legacy]
        assert aws.live_ids() | oci.live_ids() == a_vms | b_vms | {legacy}
        assert aws.calls_of("destroy") == [] and oci.calls_of("destroy") == []
        # A deletes its fleet: only its own VMs go, found by status and by tag.
        await kube.delete(INFERENCE_RELAYS, a.name)
        await a.reconcile()
        assert aws.live_ids() | oci.live_ids() == b_vms | {legacy}
        assert (await _detector(a, metrics).sweep()).destroyed == []
        assert aws.live_ids() | oci.live_ids() == b_vms | {legacy}
    finally:
        for fleet in (a, b):
            if await fleet.kube.get_or_none(INFERENCE_RELAYS, fleet.name) is not None:
                await fleet.kube.patch(
                    INFERENCE_RELAYS, fleet.name, {"metadata": {"finalizers": None}}
                )
                await fleet.kube.delete(INFERENCE_RELAYS, fleet.name)
