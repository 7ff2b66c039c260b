"""The AWS driver against moto's in-process EC2 (boto3's HTTP boundary)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from botocore.exceptions import ClientError

from controller.relay.drivers.aws import AwsDriver, classify, map_state
from controller.relay.drivers.base import (
    ConfigurationError,
    DriverError,
    InstanceNotFound,
    LaunchRequest,
    QuotaExceeded,
    Throttled,
    TransientCloudError,
    vm_tags,
)
from controller.relay.drivers.ec2_setup import ImageQuery
from controller.relay.providers import AWS, arch_for_shape
from tests.controller.relay.moto_ec2 import IMAGES, REGION
from wspin.core.kinds import SECRETS
from wspin.kube.client import Kube

USER_DATA = "#cloud-config\npackages: [curl]\n"


TAGS = vm_tags(cluster="c1", owner_uid="uid-1", provider="aws") | {
    "inferencerelay-launch": "c" * 64
}


def _request(**changes: Any) -> LaunchRequest:
    base: dict[str, Any] = {
        "name": "relay-aws",
        "region": REGION,
        "shape": "t3.micro",
        "cloud_init": base64.b64encode(USER_DATA.encode()).decode(),
        "tags": TAGS,
        "client_token": "c" * 64,
        "arch": "amd64",
    }
    return LaunchRequest(**(base | changes))


def _driver(kube: Kube | None = None, namespace: str = "ns") -> AwsDriver:
    return AwsDriver(
        kube,
        namespace,
        secret_name=AWS.credentials_secret,
        default_region=AWS.default_region,
        image=IMAGES,
    )


def _instances(ec2: Any) -> list[dict[str, Any]]:
    return [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]


async def test_a_launch_is_tagged_carries_the_client_token_and_the_document(ec2: Any) -> None:
    instance_id = await _driver().launch(_request())
    [instance] = _instances(ec2)
    assert instance["InstanceId"] == instance_id
    tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
    assert tags == {"Name": "relay-aws", **TAGS}
    assert instance["ClientToken"] == "c" * 64
    assert instance["ImageId"] == "ami-0a11ce0000000amd"
    attribute = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
    assert base64.b64decode(attribute["UserData"]["Value"]).decode() == USER_DATA
    [group] = ec2.describe_security_groups(GroupNames=["llmsafespaces-relay-proxy"])[
        "SecurityGroups"
    ]
    assert group["IpPermissions"][0]["FromPort"] == 8080
    # The user data holds the token: IMDSv2 only, one hop.
    options = instance["MetadataOptions"]
    assert (options["HttpTokens"], options["HttpPutResponseHopLimit"]) == ("required", 1)
    assert options["HttpEndpoint"] == "enabled"  # cloud-init reads the user data through it


async def test_a_retried_launch_with_the_same_token_returns_the_same_instance(ec2: Any) -> None:
    driver = _driver()
    first = await driver.launch(_request())
    assert await driver.launch(_request()) == first
    assert len(_instances(ec2)) == 1
    other = TAGS | {"inferencerelay-launch": "d" * 64}
    assert await driver.launch(_request(client_token="d" * 64, tags=other)) != first


async def test_describe_reports_state_ip_tags_and_launch_time(ec2: Any) -> None:
    driver = _driver()
    instance_id = await driver.launch(_request())
    described = await driver.describe(instance_id, REGION)
    assert (described.owner_uid, described.provider, described.cluster) == ("uid-1", "aws", "c1")
    assert described.state == "running" and described.public_ip
    assert described.launched_at is not None and described.launch_token == "c" * 64
    with pytest.raises(InstanceNotFound):
        await driver.describe("i-0123456789abcdef0", REGION)


async def test_listing_returns_only_managed_vms_matching_every_tag(ec2: Any) -> None:
    driver = _driver()
    ours = await driver.launch(_request())
    ec2.run_instances(
        ImageId="ami-0a11ce0000000amd", InstanceType="t3.micro", MinCount=1, MaxCount=1
    )
    [listed] = await driver.list({}, [REGION])
    assert listed.instance_id == ours and listed.region == REGION
    assert [vm.instance_id for vm in await driver.list(TAGS, [REGION])] == [ours]
    assert await driver.list({"llmsafespaces-cluster": "c2"}, [REGION]) == []
    assert await driver.list({}, ["eu-west-1"]) == []


async def test_destroy_terminates_and_is_idempotent(ec2: Any) -> None:
    driver = _driver()
    instance_id = await driver.launch(_request())
    await driver.destroy(instance_id, REGION)
    [listed] = await driver.list({}, [REGION])
    assert listed.state == "terminated"
    assert (await driver.describe(instance_id, REGION)).state == "terminated"
    await driver.destroy("i-0123456789abcdef0", REGION)


async def test_the_image_follows_the_requests_architecture(ec2: Any) -> None:
    for shape, token in (("t4g.micro", "a"), ("m6i.large", "b")):
        arch = arch_for_shape("aws", shape)  # as the launch request carries it
        await _driver().launch(_request(shape=shape, arch=arch, client_token=token * 64))
    by_type = {i["InstanceType"]: i["ImageId"] for i in _instances(ec2)}
    assert by_type == {"t4g.micro": "ami-0a11ce0000000arm", "m6i.large": "ami-0a11ce0000000amd"}


async def test_no_image_for_the_architecture_is_a_configuration_error(ec2: Any) -> None:
    driver = AwsDriver(
        None,
        "ns",
        secret_name=AWS.credentials_secret,
        default_region=AWS.default_region,
        image=ImageQuery(name_pattern="ubuntu-noble-{arch}-*"),
    )
    with pytest.raises(ConfigurationError, match="arm64"):
        await driver.launch(_request(shape="t4g.micro", arch="arm64"))
    assert _instances(ec2) == []


async def test_credentials_come_from_the_secret_or_the_default_chain(
    ec2: Any, kube: Kube, namespace: str
) -> None:
    driver = _driver(kube, namespace)
    assert await driver.list({}, [REGION]) == []  # no Secret: default chain
    await kube.create(
        SECRETS,
        {"metadata": {"name": "aws-relay-irwa"},
         "data": {"accessKeyId": base64.b64encode(b"AKIDEXAMPLE").decode(),
                  "secretAccessKey": base64.b64encode(b"secret").decode()}},
        namespace,
    )  # fmt: skip
    assert await driver._static_credentials() == ("AKIDEXAMPLE", "secret")
    assert await driver.launch(_request())


def _client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"}}, "RunInstances")


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("InvalidInstanceID.NotFound", InstanceNotFound),
        ("InsufficientInstanceCapacity", QuotaExceeded),
        ("InstanceLimitExceeded", QuotaExceeded),
        ("RequestLimitExceeded", Throttled),
        ("Throttling", Throttled),
        ("InvalidParameterValue", ConfigurationError),
        ("InvalidAMIID.NotFound", ConfigurationError),
        ("UnauthorizedOperation", ConfigurationError),
        ("AccessDenied", ConfigurationError),
        ("InternalError", TransientCloudError),
    ],
)
def test_aws_error_codes_map_to_classes(code: str, kind: type[DriverError]) -> None:
    error = classify(_client_error(code), "run instance", AWS.credentials_secret)
    assert type(error) is kind


def test_an_error_message_mentioning_not_found_is_not_classed_by_its_text() -> None:
    error = ClientError(
        {"Error": {"Code": "Unavailable", "Message": "InvalidInstanceID.NotFound 404"}},
        "TerminateInstances",
    )
    assert (
        type(classify(error, "terminate instance", AWS.credentials_secret)) is TransientCloudError
    )


@pytest.mark.parametrize(
    ("name", "state"),
    [("pending", "pending"), ("running", "running"), ("stopping", "stopping"),
     ("stopped", "stopped"), ("shutting-down", "terminated"), ("terminated", "terminated"),
     ("weird", "pending")],
)  # fmt: skip
def test_aws_states_map(name: str, state: str) -> None:
    assert map_state(name) == state


async def test_a_request_without_its_architecture_is_refused_before_any_call(ec2: Any) -> None:
    with pytest.raises(ConfigurationError, match="architecture"):
        await _driver().launch(_request(arch=""))
    assert _instances(ec2) == []
