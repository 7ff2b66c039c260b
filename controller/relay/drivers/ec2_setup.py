"""What an EC2 launch needs first: the VM image for the architecture and the security group.

Blocking boto3 calls, run by the driver in a worker thread. The image follows the shape's
architecture, so an amd64 shape never boots an arm64 image; the group is found by name or
created in the default VPC, and a creation race with another replica resolves to the
winner's group.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import ClientError

from controller.relay.drivers.base import MANAGED_BY_VALUE, TAG_MANAGED_BY, ConfigurationError

SECURITY_GROUP: Final = "llmsafespaces-relay-proxy"
_AWS_ARCH: Final = {"amd64": "x86_64", "arm64": "arm64"}


@dataclass(frozen=True)
class ImageQuery:
    """Which image relay VMs boot: the newest available match for the VM's architecture."""

    owner: str = "099720109477"
    """Canonical's account."""
    name_pattern: str = "ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-{arch}-server-*"
    """``{arch}`` becomes ``amd64`` or ``arm64`` (Ubuntu's spelling)."""


DEFAULT_IMAGE: Final = ImageQuery()


def find_image(ec2: Any, image: ImageQuery, arch: str) -> str:
    """The newest available image matching ``image`` for ``arch``; blocking (run in a thread)."""
    pattern = image.name_pattern.format(arch=arch)
    reply = ec2.describe_images(
        Owners=[image.owner],
        Filters=[
            {"Name": "name", "Values": [pattern]},
            {"Name": "architecture", "Values": [_AWS_ARCH[arch]]},
            {"Name": "state", "Values": ["available"]},
        ],
    )
    images = sorted(reply.get("Images", []), key=lambda i: str(i.get("CreationDate", "")))
    if not images:
        raise ConfigurationError(
            f"no {arch} image named {pattern!r} owned by {image.owner}",
            "check the region supports the image, or pick another shape",
        )
    return str(images[-1]["ImageId"])


def security_group(ec2: Any) -> str:
    """The relay security group's ID, created (TCP 8080 open) when missing; blocking."""

    def find() -> str | None:
        reply = ec2.describe_security_groups(
            Filters=[{"Name": "group-name", "Values": [SECURITY_GROUP]}]
        )
        groups = reply.get("SecurityGroups", [])
        return str(groups[0]["GroupId"]) if groups else None

    found = find()
    if found:
        return found
    vpcs = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}]).get("Vpcs")
    if not vpcs:
        raise ConfigurationError(
            "the region has no default VPC for the relay security group",
            "create a default VPC (aws ec2 create-default-vpc)",
        )
    try:
        created = ec2.create_security_group(
            GroupName=SECURITY_GROUP,
            Description="LLMSafeSpaces relay-proxy (TCP 8080)",
            VpcId=vpcs[0]["VpcId"],
            TagSpecifications=[
                {
                    "ResourceType": "security-group",
                    "Tags": [{"Key": TAG_MANAGED_BY, "Value": MANAGED_BY_VALUE}],
                }
            ],
        )
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") == "InvalidGroup.Duplicate":
            raced = find()  # another replica or pass created it first
            if raced:
                return raced
        raise
    group_id = str(created["GroupId"])
    # A duplicate rule is fine; a missing one shows up as an unhealthy relay.
    with contextlib.suppress(ClientError):
        ec2.authorize_security_group_ingress(
            GroupId=group_id,
            IpPermissions=[
                {
                    "IpProtocol": "tcp",
                    "FromPort": 8080,
                    "ToPort": 8080,
                    "IpRanges": [{"CidrIp": "0.0.0.0/0"}],
                }
            ],
        )
    return group_id
