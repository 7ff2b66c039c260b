"""The launch request: idempotency key, tags, credentials check, shape, pins and user data."""

from __future__ import annotations

import base64

import pytest

from controller.relay.drivers.base import ConfigurationError, TokenRef
from controller.relay.request import build_request, client_token
from controller.relay.spec import ProviderSpec
from tests.controller.relay.conftest import ARTIFACTS, SHA_AMD64

SLOT = ProviderSpec("aws", "us-east-1", "aws-relay-irwa", "m6i.large")
EXPECTED = {"aws": "aws-relay-irwa"}
REF = TokenRef(reference="/relay-token/uid-1/c0ffee", fetch="fetch-token /relay-token/uid-1/c0ffee")


def test_the_client_token_is_stable_per_slot_and_vm_token_and_hides_the_token() -> None:
    token = "f" * 64
    key = client_token("uid-1", "aws", token)
    assert key == client_token("uid-1", "aws", token) and len(key) == 64
    assert key != client_token("uid-1", "aws", "e" * 64)
    assert key != client_token("uid-1", "oci", token)
    assert key != client_token("uid-2", "aws", token)
    assert token not in key


def test_the_request_carries_tags_shape_arch_and_base64_user_data() -> None:
    request = build_request(
        SLOT,
        uid="uid-1",
        cluster="cluster-a",
        upstream_url="https://u.example/v1",
        vm_token="f" * 64,
        token_ref=REF,
        artifacts=ARTIFACTS,
        expected_credentials=EXPECTED,
    )
    assert (request.name, request.region, request.shape) == ("relay-aws", "us-east-1", "m6i.large")
    assert request.arch == "amd64" and request.client_token == client_token(
        "uid-1", "aws", "f" * 64
    )
    assert request.tags == {
        "managed-by": "llmsafespaces-relay",
        "llmsafespaces-cluster": "cluster-a",
        "inferencerelay-uid": "uid-1",
        "inferencerelay-provider": "aws",
        "inferencerelay-launch": request.client_token,
        "inferencerelay-token-ref": REF.reference,
    }
    document = base64.b64decode(request.cloud_init).decode()
    assert SHA_AMD64 in document and "relay-proxy-amd64" in document
    assert REF.fetch in document and "f" * 64 not in document


@pytest.mark.parametrize(
    ("slot", "phrase"),
    [
        (ProviderSpec("aws", "us-east-1", "other"), "credentialsRef.name"),
        (ProviderSpec("aws", "us-east-1", "aws-relay-irwa", "q9.huge"), "q9.huge"),
    ],
)
def test_a_request_that_cannot_be_built_is_a_configuration_error(
    slot: ProviderSpec, phrase: str
) -> None:
    with pytest.raises(ConfigurationError, match=phrase):
        build_request(
            slot,
            uid="uid-1",
            cluster="cluster-a",
            upstream_url="https://u.example/v1",
            vm_token="f" * 64,
            token_ref=REF,
            artifacts=ARTIFACTS,
            expected_credentials=EXPECTED,
        )


def test_a_bad_upstream_url_is_a_configuration_error_naming_the_field() -> None:
    with pytest.raises(ConfigurationError, match="upstream URL") as raised:
        build_request(
            SLOT,
            uid="uid-1",
            cluster="cluster-a",
            upstream_url="https://u.example/$(id)",
            vm_token="f" * 64,
            token_ref=REF,
            artifacts=ARTIFACTS,
            expected_credentials=EXPECTED,
        )
    assert "spec.upstreamURL" in raised.value.fix
