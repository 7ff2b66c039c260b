"""Manual rotation through the rotate annotation."""

from __future__ import annotations

from controller.relay.spec import ROTATE_ANNOTATION
from controller.relay.tokens import read_tokens
from controller.types import Requeue
from tests.controller.relay.conftest import AWS_SLOT, OCI_SLOT, Fleet
from wspin.core.kinds import INFERENCE_RELAYS


async def _annotate(fleet: Fleet, value: str) -> None:
    await fleet.kube.patch(
        INFERENCE_RELAYS, fleet.name, {"metadata": {"annotations": {ROTATE_ANNOTATION: value}}}
    )


async def test_rotating_a_known_vm_destroys_it_clears_the_annotation_and_launches_anew(
    fleet: Fleet,
) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    [old] = await fleet.instances()
    token_before = (await read_tokens(fleet.kube, fleet.namespace))["aws"]
    await _annotate(fleet, old["id"])
    result = await fleet.reconcile()
    assert result == Requeue(after=10.0)
    assert [c.args["instance_id"] for c in fleet.clouds["aws"].calls_of("destroy")] == [old["id"]]
    cr = await fleet.get()
    assert cr["metadata"]["annotations"][ROTATE_ANNOTATION] == ""
    assert cr["status"]["instances"] == [] and cr["status"]["lastRotation"]
    assert (await fleet.condition("Rotating"))["status"] == "True"
    assert (
        fleet.deps.metrics.registry.get_sample_value(
            "llmsafespaces_relay_rotation_total", {"provider": "aws", "reason": "manual"}
        )
        == 1.0
    )
    await fleet.reconcile()
    [new] = await fleet.instances()
    assert new["id"] != old["id"] and fleet.clouds["aws"].live_ids() == {new["id"]}
    assert (await read_tokens(fleet.kube, fleet.namespace))["aws"] != token_before
    fleet.report(new["id"])
    await fleet.reconcile()
    assert (await fleet.condition("Rotating"))["status"] == "False"


async def test_rotating_an_unknown_id_destroys_nothing_and_clears_the_annotation(
    fleet: Fleet,
) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    await _annotate(fleet, "i-unknown")
    assert await fleet.reconcile() == Requeue(after=10.0)
    assert fleet.clouds["aws"].calls_of("destroy") == []
    assert (await fleet.get())["metadata"]["annotations"][ROTATE_ANNOTATION] == ""


async def test_a_rotated_vm_a_lagging_listing_still_shows_running_is_not_adopted_back(
    fleet: Fleet,
) -> None:
    await fleet.create(OCI_SLOT)
    await fleet.reconcile()
    [old] = await fleet.instances()
    oci = fleet.clouds["oci"]
    oci.list_lag = 5  # the cloud keeps listing the destroyed VM as running for a while
    await _annotate(fleet, old["id"])
    await fleet.reconcile()
    await fleet.reconcile()
    [new] = await fleet.instances()
    assert new["id"] != old["id"] and new["id"] in oci.live_ids()
    assert len(oci.calls_of("launch")) == 2
    assert [c.args["instance_id"] for c in oci.calls_of("destroy")] == [old["id"]]
