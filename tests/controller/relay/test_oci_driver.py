"""The OCI driver: credentials, error classes, tags, and SDK calls over loopback HTTP."""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

import oci
import pytest

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
from controller.relay.drivers.oci import OciDriver, classify_status, map_state, oci_config
from controller.relay.drivers.providers import OCI
from tests.controller.relay.oci_credentials import FINGERPRINT, TENANCY, USER, credential_data
from wspin.core.kinds import SECRETS
from wspin.kube.client import Kube


def config_of(data: dict[str, str], region: str) -> dict[str, Any]:
    return oci_config(
        data, region, secret_name=OCI.credentials_secret, default_region=OCI.default_region
    )


@pytest.mark.parametrize(
    ("lifecycle", "state"),
    [("PROVISIONING", "pending"), ("STARTING", "pending"), ("RUNNING", "running"),
     ("STOPPING", "stopping"), ("STOPPED", "stopped"), ("TERMINATING", "terminated"),
     ("TERMINATED", "terminated"), ("running", "running"), ("MOVING", "pending")],
)  # fmt: skip
def test_oci_lifecycle_states_map(lifecycle: str, state: str) -> None:
    assert map_state(lifecycle) == state


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [(429, "TooManyRequests", Throttled), (500, "InternalError", TransientCloudError),
     (503, "ServiceUnavailable", TransientCloudError), (400, "LimitExceeded", QuotaExceeded),
     (400, "InvalidParameter", ConfigurationError), (401, "NotAuthenticated", ConfigurationError),
     (403, "NotAuthorized", ConfigurationError),
     (404, "NotAuthorizedOrNotFound", ConfigurationError),
     (422, "Unprocessable", ConfigurationError), (502, "BadGateway", TransientCloudError)],
)  # fmt: skip
def test_oci_errors_map_to_classes_by_status_and_code(
    status: int, code: str, kind: type[DriverError]
) -> None:
    assert type(classify_status(status, code, "m")) is kind


def test_a_404_names_a_missing_instance_only_for_a_call_about_one_instance() -> None:
    assert type(classify_status(404, "NotAuthorizedOrNotFound", "m", instance_call=True)) is (
        InstanceNotFound
    )
    # An OCID can contain "404": the text never decides the class.
    text = "instance ocid1.instance.oc1..aa404bb failed"
    assert type(classify_status(409, "Conflict", text, instance_call=True)) is ConfigurationError


def test_missing_credential_keys_are_named(pem: str) -> None:
    with pytest.raises(ConfigurationError, match="fingerprint, key"):
        config_of({"tenancy": TENANCY, "user": USER}, "us-ashburn-1")


def test_an_unparseable_key_is_a_configuration_error(pem: str) -> None:
    with pytest.raises(ConfigurationError, match="unusable OCI API key"):
        config_of(
            credential_data("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----"),
            "r",
        )


def test_the_region_comes_from_the_call_then_the_secret(pem: str) -> None:
    assert (
        config_of(credential_data(pem, region="eu-frankfurt-1"), "")["region"] == "eu-frankfurt-1"
    )
    assert (
        config_of(credential_data(pem, region="eu-frankfurt-1"), "us-phoenix-1")["region"]
        == "us-phoenix-1"
    )
    assert config_of(credential_data(pem), "")["region"] == "us-ashburn-1"


async def test_a_missing_secret_is_a_configuration_error(kube: Kube, namespace: str) -> None:
    with pytest.raises(ConfigurationError, match="oci-credentials"):
        await OciDriver(
            kube, namespace, secret_name=OCI.credentials_secret, default_region=OCI.default_region
        ).list({}, ["us-ashburn-1"])


# -- SDK calls against a loopback compute endpoint -------------------------------------------


@pytest.fixture
async def oci_driver(
    kube: Kube, namespace: str, pem: str, compute: tuple[str, list[dict[str, Any]]]
) -> OciDriver:
    data = {k: base64.b64encode(v.encode()).decode() for k, v in credential_data(pem).items()}
    await kube.create(SECRETS, {"metadata": {"name": "oci-credentials"}, "data": data}, namespace)
    return OciDriver(
        kube,
        namespace,
        secret_name=OCI.credentials_secret,
        default_region=OCI.default_region,
        endpoint=compute[0],
    )


async def test_listing_keeps_our_tagged_vms_with_ip_owner_and_signed_requests(
    oci_driver: OciDriver, compute: tuple[str, list[dict[str, Any]]]
) -> None:
    listed = {vm.instance_id: vm for vm in await oci_driver.list({}, ["us-ashburn-1"])}
    assert set(listed) == {"ocid1.instance.ours", "ocid1.instance.gone"}
    ours = listed["ocid1.instance.ours"]
    assert (ours.state, ours.public_ip, ours.owner_uid, ours.provider) == (
        "running", "192.0.2.10", "u-1", "oci",
    )  # fmt: skip
    assert ours.launched_at is not None and listed["ocid1.instance.gone"].public_ip == ""
    assert ours.cluster == "c1"
    assert await oci_driver.list({"llmsafespaces-cluster": "c2"}, ["us-ashburn-1"]) == []
    authorization = compute[1][0]["authorization"]
    assert 'version="1"' in authorization
    assert f'keyId="{TENANCY}/{USER}/{FINGERPRINT}"' in authorization
    assert json.dumps(compute[1]).count(FINGERPRINT) == len(compute[1])


async def test_destroy_is_idempotent_and_describe_raises_not_found(oci_driver: OciDriver) -> None:
    await oci_driver.destroy("ocid1.instance.ours", "us-ashburn-1")
    described = await oci_driver.describe("ocid1.instance.ours", "us-ashburn-1")
    assert described.state == "terminated" and described.owner_uid == "u-1"
    await oci_driver.destroy("ocid1.instance.nope", "us-ashburn-1")
    with pytest.raises(InstanceNotFound):
        await oci_driver.describe("ocid1.instance.nope", "us-ashburn-1")


LAUNCH_TAGS = vm_tags(cluster="c1", owner_uid="u-1", provider="oci") | {
    "inferencerelay-launch": "r" * 64
}


def _launch_request(**changes: Any) -> LaunchRequest:
    base: dict[str, Any] = {
        "name": "relay-oci",
        "region": "us-ashburn-1",
        "shape": OCI.default_shape,
        "cloud_init": "I2Nsb3VkLWNvbmZpZwo=",
        "tags": LAUNCH_TAGS,
        "client_token": "r" * 64,
        "arch": "arm64",
    }
    return LaunchRequest(**(base | changes))


async def test_a_launch_attaches_tags_user_data_and_retry_token_and_returns_at_once(
    kube: Kube, namespace: str, pem: str, compute: tuple[str, list[dict[str, Any]]]
) -> None:
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
    assert await driver.launch(_launch_request()) == "ocid1.instance.launched"
    [launch] = [c for c in compute[1] if c["method"] == "POST"]
    body = launch["body"]
    assert body["freeformTags"] == LAUNCH_TAGS
    assert body["metadata"] == {"user_data": "I2Nsb3VkLWNvbmZpZwo="}
    assert body["shape"] == "VM.Standard.A1.Flex"
    assert body["createVnicDetails"] == {"assignPublicIp": True, "subnetId": "ocid1.subnet.relay"}
    assert body["sourceDetails"]["imageId"] == "ocid1.image.jammy-arm"
    # The user data holds the token: the metadata service's v2 endpoints only.
    assert body["instanceOptions"] == {"areLegacyImdsEndpointsDisabled": True}
    assert launch["retry_token"] == "r" * 64
    [images] = [c for c in compute[1] if c["path"].startswith("/20160918/images")]
    assert images["query"]["shape"] == "VM.Standard.A1.Flex"
    # The same launch again finds the instance by its launch tag: no second POST.
    assert await driver.launch(_launch_request()) == "ocid1.instance.launched"
    assert len([c for c in compute[1] if c["method"] == "POST"]) == 1


async def test_a_launch_without_a_subnet_in_the_secret_is_a_configuration_error(
    oci_driver: OciDriver,
) -> None:
    with pytest.raises(ConfigurationError, match="subnet"):
        await oci_driver.launch(_launch_request(cloud_init="e30="))


async def test_sdk_clients_and_key_parsing_stay_off_the_event_loop(
    oci_driver: OciDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building an SDK client loads its service model and parses the API key (tens of
    milliseconds each): done on the loop, every pass would stall watches and leases."""
    loop_thread = threading.get_ident()
    on_loop: list[str] = []

    def watched(cls: Any) -> Any:
        class Watched(cls):  # type: ignore[misc]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                if threading.get_ident() == loop_thread:
                    on_loop.append(cls.__name__)
                super().__init__(*args, **kwargs)

        return Watched

    for module, name in (
        (oci.core, "ComputeClient"),
        (oci.core, "VirtualNetworkClient"),
        (oci.identity, "IdentityClient"),
        (oci.signer, "Signer"),
    ):
        monkeypatch.setattr(module, name, watched(getattr(module, name)))
    assert await oci_driver.list({}, ["us-ashburn-1"])
    await oci_driver.describe("ocid1.instance.ours", "us-ashburn-1")
    await oci_driver.destroy("ocid1.instance.ours", "us-ashburn-1")
    assert on_loop == []


# -- the VM token in an OCI Vault secret ------------------------------------------------------

VAULT = "ocid1.vault.oc1.relay"
KEY = "ocid1.key.oc1.relay"
SLOT = TokenSlot(owner_uid="u-1", launch="r" * 64, region="us-ashburn-1", tags=LAUNCH_TAGS)


async def _vault_driver(
    kube: Kube, namespace: str, pem: str, url: str, vault: str = VAULT
) -> OciDriver:
    if await kube.get_or_none(SECRETS, OCI.credentials_secret, namespace) is None:
        data = credential_data(pem, subnet="ocid1.subnet.relay", compartment="ocid1.compartment.r")
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        await kube.create(
            SECRETS, {"metadata": {"name": OCI.credentials_secret}, "data": encoded}, namespace
        )
    return OciDriver(
        kube, namespace, secret_name=OCI.credentials_secret, default_region=OCI.default_region,
        endpoint=url, vault=vault, key=KEY,
    )  # fmt: skip


async def test_the_token_is_a_tagged_vault_secret_the_vm_reads_as_an_instance_principal(
    kube: Kube, namespace: str, pem: str, compute: tuple[str, list[dict[str, Any]]]
) -> None:
    url, seen = compute
    driver = await _vault_driver(kube, namespace, pem, url)
    ref = await driver.store_token(SLOT, "t" * 64)
    [create] = [c for c in seen if c["method"] == "POST" and c["path"] == "/20180608/secrets"]
    body = create["body"]
    assert (body["vaultId"], body["keyId"]) == (VAULT, KEY)
    assert body["compartmentId"] == "ocid1.compartment.r"
    assert body["secretName"] == f"relay-token-u-1-{'r' * 32}"
    assert body["freeformTags"] == LAUNCH_TAGS
    assert body["secretContent"] == {
        "contentType": "BASE64",
        "content": base64.b64encode(b"t" * 64).decode(),
    }
    assert create["authorization"].startswith("Signature")
    assert ref.reference.startswith("ocid1.vaultsecret.")
    assert "--auth instance_principal" in ref.fetch and "--region us-ashburn-1" in ref.fetch
    assert f"--secret-id {ref.reference}" in ref.fetch and "t" * 64 not in ref.fetch
    # The same launch again (a retry after a crash): a new version of the same secret.
    assert await driver.store_token(SLOT, "u" * 64) == ref
    [update] = [c for c in seen if c["method"] == "PUT"]
    assert update["path"] == f"/20180608/secrets/{ref.reference}"
    assert update["body"]["secretContent"]["content"] == base64.b64encode(b"u" * 64).decode()
    assert len([c for c in seen if c["path"] == "/20180608/secrets" and c["method"] == "POST"]) == 1


async def test_without_a_vault_the_token_is_not_stored_and_the_error_names_the_flags(
    kube: Kube, namespace: str, pem: str, compute: tuple[str, list[dict[str, Any]]]
) -> None:
    driver = await _vault_driver(kube, namespace, pem, compute[0], vault="")
    with pytest.raises(ConfigurationError) as raised:
        await driver.store_token(SLOT, "t" * 64)
    assert "--relay-oci-vault" in raised.value.fix and "--relay-oci-key" in raised.value.fix
    assert not [c for c in compute[1] if c["path"].startswith("/20180608")]


async def test_destroy_deletes_only_a_secret_in_its_vault_that_carries_the_relay_tags(
    kube: Kube, namespace: str, pem: str, compute: tuple[str, list[dict[str, Any]]]
) -> None:
    """Rule: the VM's tag is writable by anyone with instance rights; the controller schedules
    the deletion of its own token secrets only."""
    url, seen = compute
    other_vault = await _vault_driver(kube, namespace, pem, url, vault="ocid1.vault.oc1.other")
    foreign = await other_vault.store_token(SLOT, "f" * 64)
    untagged = TokenSlot(owner_uid="u-2", launch="s" * 64, region="us-ashburn-1", tags={})
    driver = await _vault_driver(kube, namespace, pem, url)
    unmarked = await driver.store_token(untagged, "g" * 64)
    ours = await driver.store_token(SLOT, "t" * 64)
    for number, reference in enumerate((foreign.reference, unmarked.reference, ours.reference)):
        tags = LAUNCH_TAGS | {TAG_TOKEN_REF: reference, "inferencerelay-launch": str(number) * 64}
        request = _launch_request(tags=tags, client_token=str(number) * 64)
        instance_id = await driver.launch(request)
        await driver.destroy(instance_id, "us-ashburn-1")
    deletions = [c for c in seen if c["path"].endswith("/actions/scheduleDeletion")]
    assert [c["path"].split("/")[3] for c in deletions] == [ours.reference]
    assert deletions[0]["body"]["timeOfDeletion"]  # a day on: OCI's shortest
    # Destroyed again: the secret is already pending deletion, nothing more is asked.
    await driver.destroy(instance_id, "us-ashburn-1")
    assert len([c for c in seen if c["path"].endswith("/actions/scheduleDeletion")]) == 1
