"""Crashes: no VM leaks whatever dies between a launch and the status write."""

from __future__ import annotations

import asyncio

import pytest

from controller.relay.deps import RelayDeps
from controller.relay.launches import Launches
from controller.relay.metrics import RelayMetrics
from controller.relay.orphans import OrphanDetector, OrphanPolicy
from controller.relay.passstate import RetryBook
from controller.relay.reconciler import InferenceRelayReconciler
from tests.controller.relay.conftest import AWS_SLOT, OCI_SLOT, Fleet
from tests.kubeapi import KubeServer
from wspin.errors import TransientError
from wspin.resources import INFERENCE_RELAYS, Conflict


async def test_a_lost_status_write_after_a_launch_is_recovered_by_adoption(
    fleet: Fleet, kube_server: KubeServer
) -> None:
    await fleet.create(AWS_SLOT)
    kube_server.fail_next(
        409, method="PUT", path=f"/apis/llmsafespaces.dev/v1/inferencerelays/{fleet.name}/status"
    )
    with pytest.raises(Conflict):
        await fleet.reconcile()
    aws = fleet.clouds["aws"]
    [launched] = aws.live_ids()
    assert "instances" not in ((await fleet.get()).get("status") or {})
    await fleet.reconcile()
    [instance] = await fleet.instances()
    assert instance["id"] == launched
    assert len(aws.calls_of("provision")) == 1 and aws.live_ids() == {launched}


async def test_a_controller_killed_mid_launch_adopts_the_vm_after_restart(fleet: Fleet) -> None:
    aws = fleet.clouds["aws"]
    aws.boot_seconds = 60
    booting = asyncio.Event()

    async def stuck(_: float) -> None:  # the launch waits for "running" and never returns
        booting.set()
        await asyncio.Event().wait()

    aws.sleep = stuck
    fleet.deps.launch_wait_seconds = 0.0
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    await booting.wait()
    await fleet.reconciler.close()  # the process dies: in-flight launches are gone
    [launched] = aws.live_ids()
    fleet.clock.advance(60)

    restarted = RelayDeps(
        kube=fleet.kube,
        namespace=fleet.namespace,
        drivers=fleet.deps.drivers,
        artifacts=fleet.deps.artifacts,
        metrics=fleet.deps.metrics,
        health=fleet.deps.health,
        clock=fleet.clock.now,
        launches=Launches(),
    )
    fleet.reconciler = InferenceRelayReconciler(restarted, fleet.reader)
    fleet.reconciler.retries = RetryBook()
    await fleet.reconcile()
    [instance] = await fleet.instances()
    assert instance["id"] == launched
    assert len(aws.calls_of("provision")) == 1 and aws.live_ids() == {launched}


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
            "us-east-1", owner_uid=other["metadata"]["uid"], provider="aws", age_seconds=3600
        )
        legacy = aws.seed("us-east-1", age_seconds=3600)
        untagged = aws.seed("us-east-1", managed=False, age_seconds=3600)
        # The controller is down: someone strips the finalizer and deletes the CR.
        await fleet.kube.patch(INFERENCE_RELAYS, fleet.name, {"metadata": {"finalizers": None}})
        await fleet.kube.delete(INFERENCE_RELAYS, fleet.name)
        detector = OrphanDetector(
            fleet.kube,
            fleet.deps.drivers,
            metrics,
            policy=OrphanPolicy(grace_seconds=600),
            clock=fleet.clock.now,
        )
        early = await detector.sweep()
        assert early.destroyed == [] and doomed in aws.live_ids()
        fleet.clock.advance(601)
        swept = await detector.sweep()
        assert swept.destroyed == [doomed]
        assert aws.live_ids() == {kept, legacy, untagged}
        assert [c.args["instance_id"] for c in aws.calls_of("destroy")] == [doomed]
    finally:
        await fleet.kube.delete(INFERENCE_RELAYS, survivor)


async def test_a_launch_still_in_flight_when_its_relay_is_deleted_does_not_leak_its_vm(
    fleet: Fleet,
) -> None:
    """The cloud call outlives the cancelled task (boto3 runs in a thread): the VM appears
    after the deletion pass started, and the finalizer must wait for a sweep that sees it."""
    aws = fleet.clouds["aws"]
    entered = asyncio.Event()
    landed = asyncio.Event()
    background: list[asyncio.Task[None]] = []

    async def run_instances_in_a_thread(region: str) -> None:
        uid = await fleet.uid()

        async def finish() -> None:
            await landed.wait()
            aws.seed(region, owner_uid=uid, provider="aws")

        background.append(asyncio.create_task(finish()))
        entered.set()
        await asyncio.Event().wait()  # the awaiting task is cancelled; the "thread" is not

    aws.on_provision = run_instances_in_a_thread
    fleet.deps.launch_wait_seconds = 0.0
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    await entered.wait()
    await fleet.kube.delete(INFERENCE_RELAYS, fleet.name)
    with pytest.raises(TransientError):
        await fleet.reconcile()
    landed.set()
    await background[0]
    [leaked] = aws.live_ids()
    await fleet.reconcile()
    assert await fleet.kube.get_or_none(INFERENCE_RELAYS, fleet.name) is None
    assert aws.live_ids() == set()
    assert [c.args["instance_id"] for c in aws.calls_of("destroy")] == [leaked]


async def test_a_launch_finishing_after_its_provider_left_the_spec_is_destroyed(
    fleet: Fleet,
) -> None:
    aws = fleet.clouds["aws"]
    aws.boot_seconds = 30
    fleet.deps.launch_wait_seconds = 0.0
    await fleet.create(AWS_SLOT, OCI_SLOT)
    await fleet.reconcile()
    await fleet.kube.patch(INFERENCE_RELAYS, fleet.name, {"spec": {"providers": [OCI_SLOT]}})
    for _ in range(3):  # the launch lands in the background, then a pass notices it
        await asyncio.sleep(0)
        await fleet.reconcile()
    [launched] = [c for c in aws.calls_of("provision")]
    assert aws.live_ids() == set()
    assert len(aws.calls_of("destroy")) == 1
    assert [i["provider"] for i in await fleet.instances()] == ["oci"]
    assert launched.args["provider"] == "aws"
