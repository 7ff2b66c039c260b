"""Where relay VM tokens are stored is checked at start; each gap names its flag and value."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.relay.tokenstore import validate_token_store
from controller.settings import RelayTokenStoreSettings
from wspin.core.errors import ConfigError

GOOD = RelayTokenStoreSettings(
    aws_instance_profile="relay-vm",
    oci_vault="ocid1.vault.oc1.iad.relay",
    oci_key="ocid1.key.oc1.iad.relay",
)


def test_a_complete_configuration_passes_and_the_fake_cloud_needs_none() -> None:
    validate_token_store(GOOD, "")
    validate_token_store(
        replace(GOOD, aws_instance_profile="arn:aws:iam::123456789012:instance-profile/relay"), ""
    )
    validate_token_store(RelayTokenStoreSettings(), "fake")


@pytest.mark.parametrize(
    ("change", "flag", "value"),
    [
        ({"aws_instance_profile": "a b"}, "--relay-aws-instance-profile", "aws.instanceProfile"),
        ({"aws_parameter_prefix": "relay"}, "--relay-aws-token-prefix", "aws.parameterPrefix"),
        ({"aws_parameter_prefix": "/a/../b"}, "--relay-aws-token-prefix", "aws.parameterPrefix"),
        ({"aws_parameter_prefix": "/a b"}, "--relay-aws-token-prefix", "aws.parameterPrefix"),
        ({"oci_vault": ""}, "--relay-oci-vault", "oci.vaultOCID"),
        ({"oci_vault": "ocid1.key.oc1.x"}, "--relay-oci-vault", "oci.vaultOCID"),
        ({"oci_key": ""}, "--relay-oci-key", "oci.keyOCID"),
    ],
)
def test_each_missing_or_malformed_setting_exits_naming_its_flag_and_value(
    change: dict[str, str], flag: str, value: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        validate_token_store(replace(GOOD, **change), "")
    assert flag in str(raised.value)
    assert f"controller.inferenceRelay.tokenStore.{value}" in raised.value.fix
    assert "\n" not in str(raised.value)


def test_one_clouds_store_is_enough_and_none_at_all_names_both() -> None:
    """An install that runs relays on one cloud names only that cloud's store."""
    validate_token_store(replace(GOOD, oci_vault="", oci_key=""), "")
    validate_token_store(replace(GOOD, aws_instance_profile=""), "")
    with pytest.raises(ConfigError) as raised:
        validate_token_store(RelayTokenStoreSettings(), "")
    for flag in ("--relay-aws-instance-profile", "--relay-oci-vault", "--relay-oci-key"):
        assert flag in raised.value.fix
