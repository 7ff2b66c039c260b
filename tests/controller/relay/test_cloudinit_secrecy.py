"""The relay VM token never reaches a place another user, local or of the cloud, can read.

Each driver (aws through moto's EC2 and SSM, oci through a loopback compute and vault API,
the fake cloud) stores the token and launches a real launch request for an arm64 and an
amd64 shape; the user data is read back from what the cloud received, decoded and parsed as
cloud-init does, and checked:

- the token is not in the user data at all (``ec2:DescribeInstanceAttribute`` or OCI
  ``GetInstance`` reads it): it is in the cloud's secret store, which the user data names;
- no unit's ``ExecStart`` reads it, also after systemd expands ``$VAR``/``${VAR}`` (that
  expansion lands in relay-proxy's argv, which ``ps`` and ``/proc/<pid>/cmdline`` show every
  local user);
- no ``runcmd``/``bootcmd`` argv holds it or reads the environment file;
- the service runs under a uid of its own, so no other process may read its environment, and
  never reaches the metadata service (the role credentials that read the token).

Destroying the VM deletes the stored token.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import boto3
import pytest
import yaml

from controller.relay.cloudinit import ENV_PATH
from controller.relay.deps import EXPECTED_CREDENTIALS
from controller.relay.drivers.aws import AwsDriver
from controller.relay.drivers.base import TAG_TOKEN_REF, Driver
from controller.relay.drivers.fake import FakeCloud
from controller.relay.drivers.oci import OciDriver
from controller.relay.drivers.providers import AWS, OCI
from controller.relay.request import build_request, check_slot, token_slot
from controller.relay.spec import ProviderSpec
from tests.controller.relay.conftest import ARTIFACTS
from tests.controller.relay.moto_ec2 import IMAGES
from tests.controller.relay.oci_credentials import credential_data
from tests.support.clock import FakeClock
from wspin.core.kinds import SECRETS
from wspin.kube.client import Kube

TOKEN = "5ec7e7" * 10 + "abcd"
TOKENS = {"arm64": "5ec7e7" * 10 + "a64a", "amd64": "5ec7e7" * 10 + "a64d"}
"""One token per launch: the same token is the same client token, hence the same VM."""
SHAPES = {
    "aws": {"arm64": "t4g.micro", "amd64": "t3.micro"},
    "oci": {"arm64": "VM.Standard.A1.Flex", "amd64": "VM.Standard.E4.Flex"},
    "fake": {"arm64": "t4g.micro", "amd64": "t3.micro"},
}
REGIONS = {"aws": "us-east-1", "oci": "us-ashburn-1", "fake": "us-east-1"}
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass
class Cloud:
    """One driver and the cloud's own view: what it stored, what the VM got."""

    driver: Driver
    user_data: Callable[[str], Awaitable[str]]
    """instance id → the decoded user data the cloud holds."""
    stored: Callable[[str], Awaitable[str | None]]
    """token reference → the token the secret store holds for it (None: deleted)."""


async def _launch(cloud: Cloud, provider: str, shape: str, token: str) -> tuple[str, str]:
    """Store the token and launch as the reconciler does; (instance id, its reference)."""
    name = "aws" if provider == "fake" else provider
    slot = ProviderSpec(
        provider=name,
        region=REGIONS[provider],
        credentials=EXPECTED_CREDENTIALS[name],
        shape=shape,
    )
    check_slot(slot, ARTIFACTS, EXPECTED_CREDENTIALS, "https://upstream.example/v1")
    where = token_slot(slot, uid="uid-secrecy", cluster="cluster-a", vm_token=token)
    ref = await cloud.driver.store_token(where, token)
    request = build_request(
        slot,
        uid="uid-secrecy",
        cluster="cluster-a",
        upstream_url="https://upstream.example/v1",
        vm_token=token,
        token_ref=ref,
        artifacts=ARTIFACTS,
        expected_credentials=EXPECTED_CREDENTIALS,
    )
    assert request.tags[TAG_TOKEN_REF] == ref.reference
    return await cloud.driver.launch(request), ref.reference


@pytest.fixture
def fake_cloud() -> Cloud:
    cloud = FakeCloud(provider="aws", clock=FakeClock())

    async def user_data(instance_id: str) -> str:
        return base64.b64decode(cloud.vm(instance_id).user_data).decode()

    async def stored(reference: str) -> str | None:
        return cloud.tokens.get(reference)

    return Cloud(cloud, user_data, stored)


@pytest.fixture
def aws_cloud(ec2: Any) -> Cloud:
    boto3.client("iam").create_instance_profile(InstanceProfileName="relay-vm")
    ssm = boto3.client("ssm", region_name=REGIONS["aws"])
    driver = AwsDriver(
        None,
        "ns",
        secret_name=AWS.credentials_secret,
        default_region=AWS.default_region,
        image=IMAGES,
        instance_profile="relay-vm",
    )

    async def user_data(instance_id: str) -> str:
        attribute = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
        return base64.b64decode(attribute["UserData"]["Value"]).decode()

    async def stored(reference: str) -> str | None:
        try:
            reply = ssm.get_parameter(Name=reference, WithDecryption=True)
        except ssm.exceptions.ParameterNotFound:
            return None
        assert reply["Parameter"]["Type"] == "SecureString"
        return str(reply["Parameter"]["Value"])

    return Cloud(driver, user_data, stored)


@pytest.fixture
async def oci_cloud(
    kube: Kube, namespace: str, pem: str, compute: tuple[str, list[dict[str, Any]]]
) -> Cloud:
    data = credential_data(pem, subnet="ocid1.subnet.relay")
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    await kube.create(
        SECRETS, {"metadata": {"name": "oci-credentials"}, "data": encoded}, namespace
    )
    url, seen = compute
    driver = OciDriver(
        kube,
        namespace,
        secret_name=OCI.credentials_secret,
        default_region=OCI.default_region,
        endpoint=url,
        vault="ocid1.vault.oc1.relay",
        key="ocid1.key.oc1.relay",
    )

    async def user_data(instance_id: str) -> str:
        launches = [c for c in seen if c["method"] == "POST" and c["path"] == "/20160918/instances"]
        return base64.b64decode(launches[-1]["body"]["metadata"]["user_data"]).decode()

    async def stored(reference: str) -> str | None:
        """Through the vault API, as the VM's CLI reads it; None once deletion is scheduled."""
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{url}/20180608/secrets/{reference}") as reply,
        ):
            secret = await reply.json()
        if secret["lifecycleState"] != "ACTIVE":
            return None
        return base64.b64decode(secret["content"]).decode()

    return Cloud(driver, user_data, stored)


def _environment(files: list[dict[str, Any]], unit: str) -> dict[str, str]:
    """The variables a unit's ``EnvironmentFile=`` lines load, as systemd reads them."""
    variables: dict[str, str] = {}
    paths = [line.split("=", 1)[1].lstrip("-") for line in unit.splitlines()
             if line.startswith("EnvironmentFile=")]  # fmt: skip
    for entry in files:
        if entry["path"] in paths:
            for line in str(entry.get("content", "")).splitlines():
                name, sep, value = line.partition("=")
                if sep and not line.lstrip().startswith("#"):
                    variables[name.strip()] = value.strip().strip('"')
    for line in unit.splitlines():
        if line.startswith("Environment="):
            for assignment in line.removeprefix("Environment=").split():
                name, _, value = assignment.partition("=")
                variables[name] = value
    return variables


def _expand(line: str, env: dict[str, str]) -> str:
    """``line`` with ``$VAR`` and ``${VAR}`` replaced as systemd does in ``ExecStart``."""
    return _VARIABLE.sub(lambda m: env.get(m.group(1) or m.group(2), ""), line)


def _argv_of(command: Any) -> str:
    return " ".join(command) if isinstance(command, list) else str(command)


def assert_token_private(text: str, token: str) -> None:
    """Every rule of the module docstring, over one decoded cloud-init document."""
    assert text.startswith("#cloud-config\n")
    assert token not in text, "the token is in the user data"
    document: dict[str, Any] = yaml.safe_load(text)
    files: list[dict[str, Any]] = document.get("write_files") or []
    assert ENV_PATH not in [f["path"] for f in files], "the user data carries the env file"
    token_names = {"RELAY_TOKEN"}
    units = [f for f in files if str(f["path"]).endswith(".service")]
    assert units, "no systemd unit runs relay-proxy"
    for unit in units:
        content = str(unit["content"])
        env = _environment(files, content)
        starts = [line for line in content.splitlines() if line.startswith("ExecStart")]
        assert starts
        for start in starts:
            expanded = _expand(start, env)
            assert token not in expanded, f"the token reaches argv through {start!r}"
            assert not any(name in start for name in token_names), (
                f"the token reaches argv through {start!r}"
            )
        assert "DynamicUser=yes" in content.splitlines(), "the service shares its uid"
        denied = [
            address
            for line in content.splitlines()
            if line.startswith("IPAddressDeny=")
            for address in line.partition("=")[2].split()
        ]
        assert "169.254.169.254" in denied, "the service reaches the metadata service's token"
    for key in ("runcmd", "bootcmd"):
        for command in document.get(key) or []:
            argv = _argv_of(command)
            assert token not in argv
            assert ENV_PATH not in argv and not any(name in argv for name in token_names)


async def _check(cloud: Cloud, provider: str) -> None:
    for arch, shape in SHAPES[provider].items():
        instance_id, reference = await _launch(cloud, provider, shape, TOKENS[arch])
        text = await cloud.user_data(instance_id)
        assert f"relay-proxy-{arch}" in text
        assert reference in text, "the user data does not name where the token is"
        assert_token_private(text, TOKENS[arch])
        assert await cloud.stored(reference) == TOKENS[arch]
        # The same launch again (a retry after a crash): the same VM, the token overwritten.
        assert await _launch(cloud, provider, shape, TOKENS[arch]) == (instance_id, reference)
        assert await cloud.stored(reference) == TOKENS[arch]
        await cloud.driver.destroy(instance_id, REGIONS[provider])
        assert await cloud.stored(reference) is None, "the token outlives its VM"


async def test_the_aws_driver_keeps_the_vm_token_out_of_user_data_and_from_local_users(
    aws_cloud: Cloud,
) -> None:
    await _check(aws_cloud, "aws")


async def test_the_oci_driver_keeps_the_vm_token_out_of_user_data_and_from_local_users(
    oci_cloud: Cloud,
) -> None:
    await _check(oci_cloud, "oci")


async def test_the_fake_cloud_keeps_the_vm_token_out_of_user_data_and_from_local_users(
    fake_cloud: Cloud,
) -> None:
    await _check(fake_cloud, "fake")


@pytest.mark.parametrize(
    ("unit_line", "problem"),
    [
        ("ExecStart=/usr/local/bin/relay-proxy --token=${RELAY_TOKEN}", "argv"),
        ("ExecStart=/usr/local/bin/relay-proxy --token=$RELAY_TOKEN", "argv"),
        ("User=nobody", "uid"),
        ("IPAddressDeny=", "metadata"),
        ("# token in the user data", "user data"),
    ],
)
def test_the_check_catches_a_token_on_the_command_line_a_shared_uid_or_the_metadata_service(
    unit_line: str, problem: str
) -> None:
    """The checker itself can fail: the unit the relay once shipped is caught."""
    unit = (
        "[Service]\nEnvironmentFile=/etc/relay-proxy/env\nDynamicUser=yes\n"
        "IPAddressDeny=169.254.169.254\n"
    )
    files: list[dict[str, str]] = []
    if unit_line.startswith("#"):
        files.append({"path": ENV_PATH, "owner": "root:root", "permissions": "0600",
                      "content": f"RELAY_TOKEN={TOKEN}\n"})  # fmt: skip
        unit += "ExecStart=/bin/x\n"
    elif unit_line.startswith("User="):
        unit = unit.replace("DynamicUser=yes\n", unit_line + "\n") + "ExecStart=/bin/x\n"
    elif unit_line.startswith("IPAddressDeny="):
        unit = unit.replace("IPAddressDeny=169.254.169.254\n", unit_line + "\n")
        unit += "ExecStart=/bin/x\n"
    else:
        unit += unit_line + "\n"
    document = {
        "write_files": [
            *files,
            {"path": "/etc/systemd/system/relay-proxy.service", "permissions": "0644",
             "content": unit},
        ]
    }  # fmt: skip
    text = "#cloud-config\n" + yaml.safe_dump(document)
    with pytest.raises(AssertionError, match=problem):
        assert_token_private(text, TOKEN)
