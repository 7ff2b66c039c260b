"""``list_vms``: one listing over every driver; a failing provider is reported, not raised."""

from __future__ import annotations

from controller.relay.drivers.base import TransientCloudError
from controller.relay.drivers.fake import FakeCloud
from controller.relay.listing import fleet_regions, list_vms
from controller.relay.spec import parse_spec
from tests.controller.relay.conftest import AWS_SLOT, OCI_SLOT


async def test_every_provider_is_listed_in_its_regions_and_a_failure_is_reported(
    aws: FakeCloud, oci: FakeCloud
) -> None:
    ours = aws.seed("us-east-1", owner_uid="u-1", provider="aws")
    aws.seed("us-east-1", owner_uid="u-2", provider="aws")
    aws.seed("eu-west-1", owner_uid="u-1", provider="aws")
    oci.inject("list", TransientCloudError("compute API down"))
    listing = await list_vms(
        {"aws": aws, "oci": oci},
        {"inferencerelay-uid": "u-1"},
        {"aws": ["us-east-1"], "oci": ["us-ashburn-1"], "gcp": ["us-west1"]},
    )
    assert [(p, vm.instance_id) for p, vm in listing.vms] == [("aws", ours)]
    assert listing.failed == {"oci": "compute API down"}


def test_a_fleet_is_looked_for_where_its_spec_and_its_status_put_it() -> None:
    spec = parse_spec({"spec": {"providers": [AWS_SLOT, OCI_SLOT]}})
    status = {"instances": [{"provider": "aws", "region": "us-west-2"}, {"provider": ""}]}
    assert fleet_regions(spec, status) == {
        "aws": ["us-east-1", "us-west-2"],
        "oci": ["us-ashburn-1"],
    }
    assert fleet_regions(None, status) == {"aws": ["us-west-2"]}
