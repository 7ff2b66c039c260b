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
from tests.controller.relay.conftest import AWS_SLOT, Fleet
from tests.kubeapi import KubeServer
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
