"""The relay VM token never reaches a place another local user can read, on every cloud.

Each driver (aws through moto's EC2, oci through a loopback compute API, the fake cloud)
launches a real launch request for an arm64 and an amd64 shape; the user data is read back
from what the cloud received, decoded and parsed as cloud-init does, and checked:

- the token is in exactly one file, owned by root and readable by root only;
- no unit's ``ExecStart`` holds it, also after systemd expands ``$VAR``/``${VAR}`` from the
  unit's ``EnvironmentFile`` (that expansion lands in relay-proxy's argv, which ``ps`` and
  ``/proc/<pid>/cmdline`` show every local user);
- no ``runcmd``/``bootcmd`` argv holds it or reads it;
- the service runs under a uid of its own, so no other process may read its environment.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import yaml

from controller.relay.cloudinit import ENV_PATH
from controller.relay.deps import EXPECTED_CREDENTIALS
from controller.relay.drivers.aws import AwsDriver
from controller.relay.drivers.fake import FakeCloud
from controller.relay.drivers.oci import OciDriver
from controller.relay.providers import AWS, OCI
from controller.relay.request import build_request
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

Launched = Callable[[str, str, str], Awaitable[str]]
"""(provider, shape, token) → the decoded user data the cloud received."""


def _request(provider: str, shape: str, token: str) -> Any:
    cloud = "aws" if provider == "fake" else provider
    slot = ProviderSpec(
        provider=cloud,
        region=REGIONS[provider],
        credentials=EXPECTED_CREDENTIALS[cloud],
        shape=shape,
    )
    return build_request(
        slot,
        uid="uid-secrecy",
        cluster="cluster-a",
        upstream_url="https://upstream.example/v1",
        vm_token=token,
        artifacts=ARTIFACTS,
        expected_credentials=EXPECTED_CREDENTIALS,
    )


@pytest.fixture
async def launch_fake() -> Launched:
    cloud = FakeCloud(provider="aws", clock=FakeClock())

    async def launched(provider: str, shape: str, token: str) -> str:
        instance_id = await cloud.launch(_request(provider, shape, token))
        return base64.b64decode(cloud.vm(instance_id).user_data).decode()

    return launched


@pytest.fixture
def launch_aws(ec2: Any) -> Launched:
    async def launched(provider: str, shape: str, token: str) -> str:
        driver = AwsDriver(
            None,
            "ns",
            secret_name=AWS.credentials_secret,
            default_region=AWS.default_region,
            image=IMAGES,
        )
        instance_id = await driver.launch(_request(provider, shape, token))
        attribute = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
        return base64.b64decode(attribute["UserData"]["Value"]).decode()

    return launched


@pytest.fixture
async def launch_oci(
    kube: Kube, namespace: str, pem: str, compute: tuple[str, list[dict[str, Any]]]
) -> Launched:
    data = credential_data(pem, subnet="ocid1.subnet.relay")
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    await kube.create(
        SECRETS, {"metadata": {"name": "oci-credentials"}, "data": encoded}, namespace
    )
    driver = OciDriver(
        kube,
        namespace,
        secret_name=OCI.credentials_secret,
        default_region=OCI.default_region,
        endpoint=compute[0],
    )

    async def launched(provider: str, shape: str, token: str) -> str:
        await driver.launch(_request(provider, shape, token))
        body = [c for c in compute[1] if c["method"] == "POST"][-1]["body"]
        return base64.b64decode(body["metadata"]["user_data"]).decode()

    return launched


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
    document: dict[str, Any] = yaml.safe_load(text)
    files: list[dict[str, Any]] = document.get("write_files") or []
    holders = [f for f in files if token in str(f.get("content", ""))]
    assert [f["path"] for f in holders] == [ENV_PATH]
    for entry in holders:
        mode = int(str(entry.get("permissions", "0644")), 8)
        assert mode & 0o077 == 0, f"{entry['path']} is readable beyond its owner ({mode:o})"
        assert entry.get("owner") == "root:root"
    assert text.count(token) == 1, "the token appears outside the environment file"
    readable = [f for f in files if int(str(f.get("permissions", "0644")), 8) & 0o004]
    assert all(token not in str(f.get("content", "")) for f in readable)
    token_names = {
        name for entry in holders for line in str(entry["content"]).splitlines()
        if token in line for name in [line.partition("=")[0].strip()]
    }  # fmt: skip
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


async def _check(launched: Launched, cloud: str) -> None:
    for arch, shape in SHAPES[cloud].items():
        text = await launched(cloud, shape, TOKENS[arch])
        assert f"relay-proxy-{arch}" in text
        assert_token_private(text, TOKENS[arch])


async def test_the_aws_driver_keeps_the_vm_token_from_other_local_users(
    launch_aws: Launched,
) -> None:
    await _check(launch_aws, "aws")


async def test_the_oci_driver_keeps_the_vm_token_from_other_local_users(
    launch_oci: Launched,
) -> None:
    await _check(launch_oci, "oci")


async def test_the_fake_cloud_keeps_the_vm_token_from_other_local_users(
    launch_fake: Launched,
) -> None:
    await _check(launch_fake, "fake")


@pytest.mark.parametrize(
    ("unit_line", "problem"),
    [
        ("ExecStart=/usr/local/bin/relay-proxy --token=${RELAY_TOKEN}", "argv"),
        ("ExecStart=/usr/local/bin/relay-proxy --token=$RELAY_TOKEN", "argv"),
        ("User=nobody", "uid"),
        ("IPAddressDeny=", "metadata"),
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
    if unit_line.startswith("User="):
        unit = unit.replace("DynamicUser=yes\n", unit_line + "\n") + "ExecStart=/bin/x\n"
    elif unit_line.startswith("IPAddressDeny="):
        unit = unit.replace("IPAddressDeny=169.254.169.254\n", unit_line + "\n")
        unit += "ExecStart=/bin/x\n"
    else:
        unit += unit_line + "\n"
    document = {
        "write_files": [
            {"path": ENV_PATH, "owner": "root:root", "permissions": "0600",
             "content": f"RELAY_TOKEN={TOKEN}\n"},
            {"path": "/etc/systemd/system/relay-proxy.service", "permissions": "0644",
             "content": unit},
        ]
    }  # fmt: skip
    text = "#cloud-config\n" + yaml.safe_dump(document)
    with pytest.raises(AssertionError, match=problem):
        assert_token_private(text, TOKEN)
