"""moto's in-process EC2 as the AWS tests set it up: the region it serves, and an image
catalogue the production image query finds."""

from __future__ import annotations

from controller.relay.drivers.ec2_setup import ImageQuery

REGION = "us-east-1"
CANONICAL = "099720109477"
# The cloud's image catalogue for these tests: one Canonical jammy image per architecture,
# named as the production query expects (moto's stock catalogue has no jammy and no arm64,
# and loading it costs seconds per test).


def _ami(ami_id: str, arch: str, aws_arch: str) -> dict[str, object]:
    return {
        "ami_id": ami_id,
        "name": f"ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-{arch}-server-20250101",
        "architecture": aws_arch,
        "owner_id": CANONICAL,
        "state": "available",
        "creation_date": "2025-01-01T00:00:00.000Z",
        "virtualization_type": "hvm",
        "root_device_type": "ebs",
        "root_device_name": "/dev/sda1",
        "public": True,
    }


AMIS = [
    _ami("ami-0a11ce0000000amd", "amd64", "x86_64"),
    _ami("ami-0a11ce0000000arm", "arm64", "arm64"),
]
IMAGES = ImageQuery()
