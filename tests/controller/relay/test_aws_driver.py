"""The AWS driver against moto's in-process EC2, SSM and IAM (boto3's HTTP boundary)."""

from __future__ import annotations

import base64
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from controller.relay.drivers.aws import AwsDriver, classify, map_state
from controller.relay.drivers.base import (
    TAG_TOKEN_REF,
    ConfigurationError,
    DriverError,
    InstanceNotFound,
    LaunchRequest,
    QuotaExceeded,
    Throttled,
    TokenSlot,
    TransientCloudError,
    vm_tags,
)
from controller.relay.drivers.ec2_setup import ImageQuery
from controller.relay.drivers.providers import AWS, arch_for_shape
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


def _driver(
    kube: Kube | None = None, namespace: str = "ns", instance_profile: str = ""
) -> AwsDriver:
    return AwsDriver(
        kube,
        namespace,
        secret_name=AWS.credentials_secret,
        default_region=AWS.default_region,
        image=IMAGES,
        instance_profile=instance_profile,
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
    # The metadata service hands out the role that reads the token: IMDSv2 only, one hop.
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


# -- the VM token in SSM Parameter Store ------------------------------------------------------

PREFIX = "/llmsafespaces/relay-token"
SLOT = TokenSlot(owner_uid="uid-1", launch="c" * 64, region=REGION, tags=TAGS)


async def test_the_token_is_a_tagged_securestring_under_the_prefix_read_by_the_vm_cli(
    ec2: Any,
) -> None:
    ssm = boto3.client("ssm", region_name=REGION)
    ref = await _driver(instance_profile="relay-vm").store_token(SLOT, "t" * 64)
    assert ref.reference == f"{PREFIX}/uid-1/{'c' * 32}"
    parameter = ssm.get_parameter(Name=ref.reference, WithDecryption=True)["Parameter"]
    assert (parameter["Type"], parameter["Value"]) == ("SecureString", "t" * 64)
    raw = ssm.get_parameter(Name=ref.reference, WithDecryption=False)["Parameter"]["Value"]
    assert raw != "t" * 64  # encrypted at rest: a plain read gets ciphertext
    listed = ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId=ref.reference)
    assert {t["Key"]: t["Value"] for t in listed["TagList"]} == TAGS
    assert ref.fetch == (
        f"aws ssm get-parameter --region {REGION} --name {ref.reference} "
        "--with-decryption --query Parameter.Value --output text"
    )
    assert "t" * 64 not in ref.fetch
    # The same launch again (a retry after a crash) overwrites, keeping name and tags.
    again = await _driver(instance_profile="relay-vm").store_token(SLOT, "u" * 64)
    assert again == ref
    assert ssm.get_parameter(Name=ref.reference, WithDecryption=True)["Parameter"]["Value"] == (
        "u" * 64
    )


async def test_the_vm_boots_with_the_instance_profile_and_destroy_deletes_its_token(
    ec2: Any,
) -> None:
    iam = boto3.client("iam", region_name=REGION)
    arn = iam.create_instance_profile(InstanceProfileName="relay-vm")["InstanceProfile"]["Arn"]
    ssm = boto3.client("ssm", region_name=REGION)
    for number, profile in enumerate(("relay-vm", arn)):
        driver = AwsDriver(
            None, "ns", secret_name=AWS.credentials_secret, default_region=REGION,
            image=IMAGES, instance_profile=profile,
        )  # fmt: skip
        launch = str(number) * 64
        ref = await driver.store_token(TokenSlot("uid-1", launch, REGION, TAGS), "t" * 64)
        tags = dict(TAGS) | {TAG_TOKEN_REF: ref.reference, "inferencerelay-launch": launch}
        instance_id = await driver.launch(_request(client_token=launch, tags=tags))
        associations = ec2.describe_iam_instance_profile_associations()
        [association] = [
            a for a in associations["IamInstanceProfileAssociations"]
            if a["InstanceId"] == instance_id
        ]  # fmt: skip
        assert association["IamInstanceProfile"]["Arn"] == arn
        await driver.destroy(instance_id, REGION)
        with pytest.raises(ssm.exceptions.ParameterNotFound):
            ssm.get_parameter(Name=ref.reference)
        await driver.destroy(instance_id, REGION)  # idempotent: the token is already gone


async def test_destroy_never_deletes_a_parameter_outside_the_prefix_a_vm_tag_names(
    ec2: Any,
) -> None:
    """Rule: the VM's tag is writable by anyone with ec2:CreateTags; the controller deletes
    only parameters under its own prefix."""
    ssm = boto3.client("ssm", region_name=REGION)
    for number, victim in enumerate(("/prod/database-password", f"{PREFIX}-other/x")):
        ssm.put_parameter(Name=victim, Value="v", Type="SecureString")
        tags = dict(TAGS) | {TAG_TOKEN_REF: victim}
        driver = _driver()
        instance_id = await driver.launch(_request(client_token=str(number) * 64, tags=tags))
        await driver.destroy(instance_id, REGION)
        kept = ssm.get_parameter(Name=victim, WithDecryption=True)["Parameter"]["Value"]
        assert kept == "v"


async def test_without_an_instance_profile_no_token_is_stored_and_the_flag_is_named(
    ec2: Any,
) -> None:
    """An install that names only OCI's store starts; a launch on AWS is refused until it
    names the profile the VM reads its token with."""
    with pytest.raises(ConfigurationError, match="--relay-aws-instance-profile"):
        await _driver().store_token(SLOT, "t" * 64)
    ssm = boto3.client("ssm", region_name=REGION)
    assert ssm.describe_parameters()["Parameters"] == []
