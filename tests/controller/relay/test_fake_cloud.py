"""The in-process cloud behaves like the real ones where the controller depends on it."""

from __future__ import annotations

import base64

import pytest

from controller.relay.drivers.base import (
    CapacityError,
    ConfigurationError,
    DriverError,
    ProvisionRequest,
    ProvisionTimeout,
)
from controller.relay.drivers.fake import FakeCloud, ManualClock
from tests.controller.relay.conftest import fake_cloud


def _request(**changes: str) -> ProvisionRequest:
    base = {
        "name": "relay-aws",
        "region": "us-east-1",
        "shape": "t4g.micro",
        "cloud_init": base64.b64encode(b"#cloud-config\n").decode(),
        "owner_uid": "uid-1",
        "provider": "aws",
        "arch": "arm64",
    }
    return ProvisionRequest(**(base | changes))


async def test_a_launch_waits_for_running_and_a_late_ip(clock: ManualClock) -> None:
    cloud = fake_cloud(clock, "aws", boot_seconds=30, ip_delay_seconds=20, poll_seconds=10)
    result = await cloud.provision(_request())
    assert result.public_ip
    assert (clock.now() - cloud.vm(result.instance_id).launched_at).total_seconds() >= 50
    [listed] = await cloud.list_instances("us-east-1")
    assert (listed.owner_uid, listed.provider, listed.state) == ("uid-1", "aws", "running")


async def test_regions_are_separate(aws: FakeCloud) -> None:
    await aws.provision(_request())
    assert await aws.list_instances("eu-west-1") == []


async def test_a_timed_out_launch_is_terminated_in_aws_mode_and_kept_in_oci_mode(
    clock: ManualClock,
) -> None:
    for terminate in (True, False):
        cloud = fake_cloud(clock, "aws", boot_seconds=900, provision_timeout_seconds=300,
                           terminate_on_failed_wait=terminate)  # fmt: skip
        with pytest.raises(ProvisionTimeout):
            await cloud.provision(_request())
        assert bool(cloud.live_ids()) is not terminate


async def test_the_same_client_token_returns_the_same_vm(aws: FakeCloud) -> None:
    first = await aws.provision(_request(client_token="tok-1"))
    second = await aws.provision(_request(client_token="tok-1"))
    assert first == second and len(aws.live_ids()) == 1


async def test_an_image_for_the_wrong_architecture_is_a_configuration_error(aws: FakeCloud) -> None:
    with pytest.raises(ConfigurationError, match="amd64"):
        await aws.provision(_request(arch="amd64"))


async def test_errors_are_injected_per_method_region_and_call_number(aws: FakeCloud) -> None:
    aws.inject("list_instances", DriverError("boom"), region="eu-west-1")
    aws.inject("list_instances", CapacityError("third"), call_number=3)
    assert await aws.list_instances("us-east-1") == []
    with pytest.raises(DriverError, match="boom"):
        await aws.list_instances("eu-west-1")
    with pytest.raises(CapacityError):
        await aws.list_instances("us-east-1")
    assert await aws.list_instances("eu-west-1") == []


async def test_a_region_quota_is_a_capacity_error(clock: ManualClock) -> None:
    cloud = fake_cloud(clock, "aws", region_quota=1)
    await cloud.provision(_request())
    with pytest.raises(CapacityError):
        await cloud.provision(_request())


async def test_destroyed_vms_list_as_terminated_then_expire(clock: ManualClock) -> None:
    cloud = fake_cloud(clock, "aws", terminated_retention_seconds=60)
    vm = (await cloud.provision(_request())).instance_id
    await cloud.destroy(vm, "us-east-1")
    [listed] = await cloud.list_instances("us-east-1")
    assert listed.state == "terminated"
    clock.advance(61)
    assert await cloud.list_instances("us-east-1") == []


async def test_a_lagging_list_shows_a_destroyed_vm_as_running_for_a_while(
    clock: ManualClock,
) -> None:
    cloud = fake_cloud(clock, "aws", list_lag=1)
    vm = (await cloud.provision(_request())).instance_id
    await cloud.destroy(vm, "us-east-1")
    assert [v.state for v in await cloud.list_instances("us-east-1")] == ["running"]
    assert [v.state for v in await cloud.list_instances("us-east-1")] == ["terminated"]
    assert (await cloud.get_status(vm, "us-east-1")).state == "terminated"


async def test_destroying_an_unknown_id_errors_or_not_as_configured(clock: ManualClock) -> None:
    await fake_cloud(clock, "oci").destroy("nope", "r")
    with pytest.raises(DriverError):
        await fake_cloud(clock, "aws", destroy_unknown_error=True).destroy("nope", "r")


async def test_untagged_vms_are_never_listed_and_calls_are_recorded(aws: FakeCloud) -> None:
    aws.seed("us-east-1", managed=False)
    assert await aws.list_instances("us-east-1") == []
    await aws.provision(_request())
    [call] = aws.calls_of("provision")
    assert call.args["user_data_decoded"] == "#cloud-config\n"
