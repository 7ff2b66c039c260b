"""Deletion: every VM destroyed (status and tag sweep) before the finalizer goes."""

from __future__ import annotations

import json

import pytest

from controller.relay.deletion import delete_fleet
from controller.relay.drivers.base import DriverError
from controller.relay.peers import PEERS_CONFIGMAP
from controller.relay.spec import FINALIZER
from tests.controller.relay.conftest import AWS_SLOT, OCI_SLOT, Fleet
from tests.kubeapi import KubeServer
from wspin.core.errors import TransientError
from wspin.core.kinds import CONFIGMAPS, INFERENCE_RELAYS


async def _delete(fleet: Fleet) -> None:
    await fleet.kube.delete(INFERENCE_RELAYS, fleet.name)


async def test_a_relay_without_the_finalizer_is_left_alone(fleet: Fleet) -> None:
    cr = await fleet.create(AWS_SLOT)
    assert await delete_fleet(fleet.deps, cr) is None
    assert fleet.clouds["aws"].calls == []


async def test_deleting_destroys_every_vm_and_releases_the_finalizer(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT, OCI_SLOT)
    await fleet.reconcile()
    await _delete(fleet)
    assert await fleet.reconcile() is None
    assert await fleet.kube.get_or_none(INFERENCE_RELAYS, fleet.name) is None
    assert fleet.clouds["aws"].live_ids() == set() and fleet.clouds["oci"].live_ids() == set()


async def test_terminated_instances_and_placeholders_are_not_destroyed_again(
    fleet: Fleet,
) -> None:
    await fleet.create(AWS_SLOT, OCI_SLOT | {"credentialsRef": {"name": "wrong"}})
    await fleet.reconcile()
    [aws_vm, placeholder] = await fleet.instances()
    assert placeholder["id"] == "oci-provisioning"
    await _delete(fleet)
    await fleet.reconcile()
    assert [c.args["instance_id"] for c in fleet.clouds["aws"].calls_of("destroy")] == [
        aws_vm["id"]
    ]
    assert fleet.clouds["oci"].calls_of("destroy") == []


async def test_a_destroy_error_keeps_the_finalizer_and_retries_later(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    fleet.clouds["aws"].inject("destroy", DriverError("API down"))
    await _delete(fleet)
    with pytest.raises(TransientError) as failure:
        await fleet.reconcile()
    assert failure.value.delay and failure.value.delay > 0
    assert FINALIZER in (await fleet.get())["metadata"]["finalizers"]
    await fleet.reconcile()
    assert await fleet.kube.get_or_none(INFERENCE_RELAYS, fleet.name) is None


async def test_a_vm_whose_driver_is_gone_keeps_the_finalizer(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    fleet.deps.drivers = {}
    await _delete(fleet)
    with pytest.raises(TransientError, match="no driver for provider aws"):
        await fleet.reconcile()
    assert FINALIZER in (await fleet.get())["metadata"]["finalizers"]


async def test_the_tag_sweep_destroys_a_leaked_vm_missing_from_status(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    [known] = await fleet.instances()
    aws = fleet.clouds["aws"]
    leaked = aws.seed("us-east-1", owner_uid=await fleet.uid(), provider="aws")
    aws.list_lag = 5  # the cloud keeps listing destroyed VMs as running
    await _delete(fleet)
    await fleet.reconcile()
    destroyed = [c.args["instance_id"] for c in aws.calls_of("destroy")]
    assert sorted(destroyed) == sorted([known["id"], leaked])  # exactly two, none twice
    assert aws.live_ids() == set()


async def test_the_peers_configmap_is_emptied_but_kept_on_delete(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    await _delete(fleet)
    await fleet.reconcile()
    peers = await fleet.kube.get(CONFIGMAPS, PEERS_CONFIGMAP, fleet.namespace)
    assert peers["data"]["peers.json"] == '{"relays":[]}'
    assert not peers["metadata"].get("ownerReferences")


async def test_a_failed_peers_update_does_not_hold_the_finalizer(
    fleet: Fleet, kube_server: KubeServer
) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    await _delete(fleet)
    kube_server.fail_next(
        500, method="PUT", path=f"/api/v1/namespaces/{fleet.namespace}/configmaps"
    )
    await fleet.reconcile()
    assert await fleet.kube.get_or_none(INFERENCE_RELAYS, fleet.name) is None
    peers = await fleet.kube.get(CONFIGMAPS, PEERS_CONFIGMAP, fleet.namespace)
    assert json.loads(peers["data"]["peers.json"])["relays"] != []


async def test_deleting_with_no_peers_configmap_is_fine(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    await fleet.kube.delete(CONFIGMAPS, PEERS_CONFIGMAP, fleet.namespace)
    await _delete(fleet)
    await fleet.reconcile()
    assert await fleet.kube.get_or_none(INFERENCE_RELAYS, fleet.name) is None


async def test_a_retried_deletion_skips_vms_status_already_shows_terminated(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT, OCI_SLOT)
    await fleet.reconcile()
    fleet.clouds["oci"].inject("destroy", DriverError("API down"))
    await _delete(fleet)
    with pytest.raises(TransientError):
        await fleet.reconcile()
    states = {i["provider"]: i["state"] for i in await fleet.instances()}
    assert states["aws"] == "terminated" and states["oci"] != "terminated"
    await fleet.reconcile()
    assert await fleet.kube.get_or_none(INFERENCE_RELAYS, fleet.name) is None
    assert len(fleet.clouds["aws"].calls_of("destroy")) == 1
    assert len(fleet.clouds["oci"].calls_of("destroy")) == 2
