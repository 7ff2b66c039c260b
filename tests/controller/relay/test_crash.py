"""Crashes: whatever dies between a launch and the status write, no second VM and no leak.

The process is killed by cancelling the reconcile while it is inside the cloud call, after
the cloud accepted the launch: exactly what a SIGKILL between ``launch`` and the status
write leaves behind (a VM, its token stored, nothing in status). A restarted controller is a
fresh reconciler with nothing in memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import pytest

from controller.relay.deps import RelayDeps
from controller.relay.drivers.base import CloudInstance, LaunchRequest, TokenRef, TokenSlot
from controller.relay.drivers.fake import FakeCloud
from controller.relay.identity import ClusterIdentity
from controller.relay.metrics import RelayMetrics
from controller.relay.orphans import OrphanDetector, OrphanPolicy
from controller.relay.reconciler import InferenceRelayReconciler
from controller.relay.tokens import read_tokens
from controller.types import ObjectKey
from tests.controller.relay.conftest import AWS_SLOT, CLUSTER, Fleet
from tests.kubeapi import KubeServer
from wspin.core.errors import KubeAPIError
from wspin.core.kinds import INFERENCE_RELAYS


class DiesAfterLaunch:
    """The fake cloud, except that the process dies right after the cloud accepted a launch
    (and, with ``hidden``, a listing that does not show new VMs yet: an eventually
    consistent API)."""

    def __init__(self, cloud: FakeCloud) -> None:
        self.cloud = cloud
        self.launched = asyncio.Event()
        self.hidden: set[str] = set()

    async def launch(self, request: LaunchRequest) -> str:
        instance_id = await self.cloud.launch(request)
        self.launched.set()
        await asyncio.Event().wait()  # killed here
        return instance_id

    async def store_token(self, slot: TokenSlot, token: str) -> TokenRef:
        return await self.cloud.store_token(slot, token)

    async def describe(self, instance_id: str, region: str) -> CloudInstance:
        return await self.cloud.describe(instance_id, region)

    async def destroy(self, instance_id: str, region: str) -> None:
        await self.cloud.destroy(instance_id, region)

    async def list(self, tags: Mapping[str, str], regions: Sequence[str]) -> list[CloudInstance]:
        return [
            vm for vm in await self.cloud.list(tags, regions) if vm.instance_id not in self.hidden
        ]


async def _kill_mid_launch(fleet: Fleet) -> str:
    aws = fleet.clouds["aws"]
    dying = DiesAfterLaunch(aws)
    fleet.deps.drivers = {"aws": dying, "oci": fleet.clouds["oci"]}
    await fleet.create(AWS_SLOT)
    await fleet.reader.refresh()
    task = asyncio.create_task(fleet.reconciler.reconcile(ObjectKey("", fleet.name)))
    await asyncio.wait_for(dying.launched.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [launched] = aws.live_ids()
    assert "instances" not in ((await fleet.get()).get("status") or {})
    return launched


def _restart(fleet: Fleet) -> None:
    """A new process: fresh reconciler and in-memory state, the same cloud and API."""
    fleet.deps = RelayDeps(
        kube=fleet.kube,
        namespace=fleet.namespace,
        drivers=dict(fleet.clouds),
        artifacts=fleet.deps.artifacts,
        metrics=fleet.deps.metrics,
        cluster=ClusterIdentity(None, CLUSTER),
        health=fleet.deps.health,
        clock=fleet.clock,
    )
    fleet.reconciler = InferenceRelayReconciler(fleet.deps, fleet.reader)


def _sweeper(fleet: Fleet, metrics: RelayMetrics) -> OrphanDetector:
    return OrphanDetector(
        fleet.kube,
        fleet.deps.drivers,
        metrics,
        ClusterIdentity(None, CLUSTER),
        policy=OrphanPolicy(grace_seconds=600),
        clock=fleet.clock,
    )


async def test_killed_between_launch_and_status_write_the_restart_adopts_the_same_vm(
    fleet: Fleet, metrics: RelayMetrics
) -> None:
    launched = await _kill_mid_launch(fleet)
    _restart(fleet)
    await fleet.reconcile()
    [instance] = await fleet.instances()
    aws = fleet.clouds["aws"]
    assert instance["id"] == launched
    assert len(aws.calls_of("launch")) == 1 and aws.live_ids() == {launched}
    fleet.clock.advance(3600)
    swept = await _sweeper(fleet, metrics).sweep()
    assert swept.destroyed == [] and aws.live_ids() == {launched}


async def test_a_restart_the_listing_cannot_show_the_vm_to_yet_finds_it_by_client_token(
    fleet: Fleet, metrics: RelayMetrics
) -> None:
    launched = await _kill_mid_launch(fleet)
    aws = fleet.clouds["aws"]
    _restart(fleet)
    lagging = DiesAfterLaunch(aws)
    lagging.hidden = {launched}
    lagging.launched.set()

    async def launch_returns(request: LaunchRequest) -> str:
        return await aws.launch(request)

    lagging.launch = launch_returns  # type: ignore[method-assign]
    fleet.deps.drivers = {"aws": lagging, "oci": fleet.clouds["oci"]}
    await fleet.reconcile()
    [instance] = await fleet.instances()
    first, second = aws.calls_of("launch")
    assert first.args["client_token"] == second.args["client_token"]
    assert instance["id"] == launched and aws.live_ids() == {launched}
    lagging.hidden = set()
    fleet.report(launched, healthy=True)
    fleet.clock.advance(3600)
    await fleet.reconcile()
    assert [i["id"] for i in await fleet.instances()] == [launched]
    assert (await _sweeper(fleet, metrics).sweep()).destroyed == []
    assert aws.live_ids() == {launched}


async def test_a_lost_status_write_after_a_launch_is_recovered_by_adoption(
    fleet: Fleet, kube_server: KubeServer
) -> None:
    await fleet.create(AWS_SLOT)
    kube_server.fail_next(
        500, method="PATCH", path=f"/apis/llmsafespaces.dev/v1/inferencerelays/{fleet.name}/status"
    )
    with pytest.raises(KubeAPIError):
        await fleet.reconcile()
    aws = fleet.clouds["aws"]
    [launched] = aws.live_ids()
    assert "instances" not in ((await fleet.get()).get("status") or {})
    await fleet.reconcile()
    [instance] = await fleet.instances()
    assert instance["id"] == launched
    assert len(aws.calls_of("launch")) == 1 and aws.live_ids() == {launched}


async def test_a_relay_deleted_while_the_controller_is_down_loses_its_vms_to_the_sweep(
    fleet: Fleet, metrics: RelayMetrics
) -> None:
    aws = fleet.clouds["aws"]
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    [doomed] = aws.live_ids()
    survivor = fleet.name + "-other"
    other = await fleet.kube.create(
        INFERENCE_RELAYS,
        {
            "metadata": {"name": survivor},
            "spec": {"upstreamURL": "https://u", "providers": [AWS_SLOT]},
        },
    )
    try:
        kept = aws.seed(
            "us-east-1",
            cluster=CLUSTER,
            owner_uid=other["metadata"]["uid"],
            provider="aws",
            age_seconds=3600,
        )
        legacy = aws.seed("us-east-1", owner_uid="gone-uid", age_seconds=3600)
        untagged = aws.seed("us-east-1", managed=False, age_seconds=3600)
        # The controller is down: someone strips the finalizer and deletes the CR.
        await fleet.kube.patch(INFERENCE_RELAYS, fleet.name, {"metadata": {"finalizers": None}})
        await fleet.kube.delete(INFERENCE_RELAYS, fleet.name)
        detector = _sweeper(fleet, metrics)
        early = await detector.sweep()
        assert early.destroyed == [] and doomed in aws.live_ids()
        fleet.clock.advance(601)
        swept = await detector.sweep()
        assert swept.destroyed == [doomed] and swept.unclaimed == [legacy]
        assert aws.live_ids() == {kept, legacy, untagged}
        assert [c.args["instance_id"] for c in aws.calls_of("destroy")] == [doomed]
    finally:
        await fleet.kube.delete(INFERENCE_RELAYS, survivor)


async def test_a_replacement_whose_status_write_is_lost_is_taken_back_not_launched_again(
    fleet: Fleet, kube_server: KubeServer
) -> None:
    aws = fleet.clouds["aws"]
    await fleet.create(AWS_SLOT, healthCheck={"replacementTimeout": "10m"})
    await fleet.reconcile()
    [old] = aws.live_ids()
    fleet.report(old, healthy=True)
    await fleet.reconcile()
    fleet.report(old, healthy=False)
    await fleet.reconcile()
    fleet.clock.advance(11 * 60)
    kube_server.fail_next(
        500, method="PATCH", path=f"/apis/llmsafespaces.dev/v1/inferencerelays/{fleet.name}/status"
    )
    with pytest.raises(KubeAPIError):
        await fleet.reconcile()  # the replacement launched; status never heard of it
    [spare] = aws.live_ids() - {old}
    assert [i["id"] for i in await fleet.instances()] == [old]

    _restart(fleet)
    await fleet.reconcile()
    entries = await fleet.instances()
    assert [(e["id"], e.get("replaces")) for e in entries] == [(old, None), (spare, old)]
    assert len(aws.calls_of("launch")) == 2 and aws.live_ids() == {old, spare}
    tokens = await read_tokens(fleet.kube, fleet.namespace)
    assert aws.token_of(spare) == tokens["aws.2"]
    assert tokens["aws.2"] not in aws.calls_of("launch")[1].args["user_data_decoded"]
    fleet.report(spare, healthy=True)
    await fleet.reconcile()
    assert aws.live_ids() == {spare}
    [taken] = await fleet.instances()
    assert taken["id"] == spare and taken["tokenKey"] == "aws.2"
