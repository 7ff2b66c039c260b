"""The in-process cloud behaves like the real ones where the controller depends on it."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from controller.relay.drivers.base import (
    ConfigurationError,
    InstanceNotFound,
    LaunchRequest,
    QuotaExceeded,
    Throttled,
    TransientCloudError,
    vm_tags,
)
from controller.relay.drivers.fake import FakeCloud
from tests.controller.relay.conftest import fake_cloud
from tests.support.clock import FakeClock

TAGS = vm_tags(cluster="c1", owner_uid="uid-1", provider="aws")


def _request(**changes: Any) -> LaunchRequest:
    base: dict[str, Any] = {
        "name": "relay-aws",
        "region": "us-east-1",
        "shape": "t4g.micro",
        "cloud_init": base64.b64encode(b"#cloud-config\n").decode(),
        "tags": TAGS,
        "client_token": "tok-1",
        "arch": "arm64",
    }
    return LaunchRequest(**(base | changes))


async def test_a_launch_returns_at_once_and_the_vm_runs_and_gets_its_ip_later(
    clock: FakeClock,
) -> None:
    cloud = fake_cloud(clock, "aws", boot_seconds=30, ip_delay_seconds=20)
    instance_id = await cloud.launch(_request())
    booting = await cloud.describe(instance_id, "us-east-1")
    assert (booting.state, booting.public_ip) == ("pending", "")
    clock.advance(30)
    assert (await cloud.describe(instance_id, "us-east-1")).state == "running"
    assert (await cloud.describe(instance_id, "us-east-1")).public_ip == ""
    clock.advance(20)
    [listed] = await cloud.list(TAGS, ["us-east-1"])
    assert (listed.owner_uid, listed.provider, listed.cluster) == ("uid-1", "aws", "c1")
    assert listed.public_ip and listed.state == "running"


async def test_regions_are_separate_and_listing_filters_by_every_tag(aws: FakeCloud) -> None:
    await aws.launch(_request())
    assert await aws.list(TAGS, ["eu-west-1"]) == []
    assert await aws.list(TAGS | {"llmsafespaces-cluster": "c2"}, ["us-east-1"]) == []
    assert len(await aws.list({}, ["us-east-1", "eu-west-1"])) == 1


async def test_the_same_client_token_returns_the_same_vm_even_once_it_is_terminated(
    aws: FakeCloud,
) -> None:
    first = await aws.launch(_request())
    assert await aws.launch(_request()) == first and len(aws.live_ids()) == 1
    await aws.destroy(first, "us-east-1")
    assert await aws.launch(_request()) == first  # as EC2 replays a used ClientToken
    assert await aws.launch(_request(client_token="tok-2")) != first


async def test_an_image_for_the_wrong_architecture_is_a_configuration_error(aws: FakeCloud) -> None:
    with pytest.raises(ConfigurationError, match="amd64"):
        await aws.launch(_request(arch="amd64"))


async def test_errors_are_injected_per_method_region_and_call_number(aws: FakeCloud) -> None:
    aws.inject("list", TransientCloudError("boom"), region="eu-west-1")
    aws.inject("list", Throttled("third"), call_number=3)
    assert await aws.list({}, ["us-east-1"]) == []
    with pytest.raises(TransientCloudError, match="boom"):
        await aws.list({}, ["eu-west-1"])
    with pytest.raises(Throttled):
        await aws.list({}, ["us-east-1"])
    assert await aws.list({}, ["eu-west-1"]) == []


async def test_a_region_quota_is_quota_exceeded(clock: FakeClock) -> None:
    cloud = fake_cloud(clock, "aws", region_quota=1)
    await cloud.launch(_request())
    with pytest.raises(QuotaExceeded):
        await cloud.launch(_request(client_token="tok-2"))


async def test_destroyed_vms_list_as_terminated_then_are_not_found(clock: FakeClock) -> None:
    cloud = fake_cloud(clock, "aws", terminated_retention_seconds=60)
    vm = await cloud.launch(_request())
    await cloud.destroy(vm, "us-east-1")
    [listed] = await cloud.list({}, ["us-east-1"])
    assert listed.state == "terminated"
    clock.advance(61)
    assert await cloud.list({}, ["us-east-1"]) == []
    with pytest.raises(InstanceNotFound):
        await cloud.describe(vm, "us-east-1")


async def test_a_lagging_list_shows_a_destroyed_vm_as_running_for_a_while(
    clock: FakeClock,
) -> None:
    cloud = fake_cloud(clock, "aws", list_lag=1)
    vm = await cloud.launch(_request())
    await cloud.destroy(vm, "us-east-1")
    assert [v.state for v in await cloud.list({}, ["us-east-1"])] == ["running"]
    assert [v.state for v in await cloud.list({}, ["us-east-1"])] == ["terminated"]
    assert (await cloud.describe(vm, "us-east-1")).state == "terminated"


async def test_destroying_an_unknown_id_is_not_an_error(clock: FakeClock) -> None:
    await fake_cloud(clock, "oci").destroy("nope", "r")


async def test_untagged_vms_are_never_listed_and_calls_are_recorded(aws: FakeCloud) -> None:
    aws.seed("us-east-1", managed=False)
    assert await aws.list({}, ["us-east-1"]) == []
    await aws.launch(_request())
    [call] = aws.calls_of("launch")
    assert call.args["user_data_decoded"] == "#cloud-config\n"
    assert call.args["tags"] == TAGS
