"""Adoption through the reconciler: tagged VMs status does not know are adopted, duplicates
destroyed, others left (the decisions themselves: ``test_plan``)."""

from __future__ import annotations

from tests.controller.relay.conftest import AWS_SLOT, OCI_SLOT, Fleet


async def test_a_tagged_running_vm_is_adopted_instead_of_launching_another(fleet: Fleet) -> None:
    cr = await fleet.create(AWS_SLOT)
    leaked = fleet.clouds["aws"].seed("us-east-1", owner_uid=cr["metadata"]["uid"], provider="aws")
    await fleet.reconcile()
    assert fleet.clouds["aws"].calls_of("launch") == []
    [instance] = await fleet.instances()
    assert instance["id"] == leaked and instance["state"] == "provisioning"


async def test_of_three_tagged_vms_one_is_adopted_and_two_destroyed(fleet: Fleet) -> None:
    cr = await fleet.create(AWS_SLOT)
    uid = cr["metadata"]["uid"]
    aws = fleet.clouds["aws"]
    ids = [aws.seed("us-east-1", owner_uid=uid, provider="aws") for _ in range(3)]
    await fleet.reconcile()
    [instance] = await fleet.instances()
    assert instance["id"] == ids[0]
    assert sorted(c.args["instance_id"] for c in aws.calls_of("destroy")) == sorted(ids[1:])
    assert aws.live_ids() == {ids[0]}


async def test_a_vm_of_another_uid_is_never_touched(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT)
    foreign = fleet.clouds["aws"].seed("us-east-1", owner_uid="someone-else", provider="aws")
    await fleet.reconcile()
    assert fleet.clouds["aws"].calls_of("destroy") == []
    assert len(fleet.clouds["aws"].calls_of("launch")) == 1
    assert foreign in fleet.clouds["aws"].live_ids()


async def test_a_terminated_tagged_vm_is_neither_adopted_nor_destroyed(fleet: Fleet) -> None:
    cr = await fleet.create(AWS_SLOT)
    dead = fleet.clouds["aws"].seed(
        "us-east-1", owner_uid=cr["metadata"]["uid"], provider="aws", state="terminated"
    )
    await fleet.reconcile()
    assert fleet.clouds["aws"].calls_of("destroy") == []
    [instance] = await fleet.instances()
    assert instance["id"] != dead and len(fleet.clouds["aws"].calls_of("launch")) == 1


async def test_an_adopted_vm_without_an_ip_gets_it_on_a_later_pass_without_a_launch(
    fleet: Fleet,
) -> None:
    cr = await fleet.create(OCI_SLOT)
    oci = fleet.clouds["oci"]
    adopted = oci.seed(
        "us-ashburn-1", owner_uid=cr["metadata"]["uid"], provider="oci", public_ip=""
    )
    await fleet.reconcile()
    [instance] = await fleet.instances()
    assert instance["id"] == adopted and instance["publicIP"] == ""
    oci.vm(adopted).public_ip = "192.0.2.7"
    await fleet.reconcile()
    [instance] = await fleet.instances()
    assert instance["publicIP"] == "192.0.2.7"
    assert oci.calls_of("launch") == []


async def test_with_two_providers_each_slot_adopts_its_own_vm(fleet: Fleet) -> None:
    cr = await fleet.create(AWS_SLOT, OCI_SLOT)
    uid = cr["metadata"]["uid"]
    aws_id = fleet.clouds["aws"].seed("us-east-1", owner_uid=uid, provider="aws")
    oci_id = fleet.clouds["oci"].seed("us-ashburn-1", owner_uid=uid, provider="oci")
    await fleet.reconcile()
    assert {i["provider"]: i["id"] for i in await fleet.instances()} == {
        "aws": aws_id,
        "oci": oci_id,
    }
    assert not fleet.clouds["aws"].calls_of("launch")
    assert not fleet.clouds["oci"].calls_of("launch")


async def test_a_legacy_vm_without_a_provider_tag_is_still_adopted_by_uid(fleet: Fleet) -> None:
    cr = await fleet.create(AWS_SLOT)
    legacy = fleet.clouds["aws"].seed("us-east-1", owner_uid=cr["metadata"]["uid"], provider="")
    await fleet.reconcile()
    [instance] = await fleet.instances()
    assert instance["id"] == legacy
