"""The InferenceRelay spec: defaults, durations, rejected specs, wire names."""

from __future__ import annotations

import json

import pytest

from controller.relay.spec import (
    CONDITION_TYPES,
    DEFAULT_UPSTREAM,
    REQUIRED_INSTANCE_KEYS,
    STATES,
    SpecError,
    has_real_id,
    new_instance,
    parse_duration,
    parse_spec,
)


def test_an_empty_spec_gets_the_schema_defaults() -> None:
    spec = parse_spec({"spec": {}})
    assert spec.upstream_url == DEFAULT_UPSTREAM
    assert spec.providers == ()
    assert spec.replacement_timeout_seconds == 900.0


def test_providers_are_read_in_order_with_their_credentials_and_shape() -> None:
    spec = parse_spec(
        {
            "spec": {
                "providers": [
                    {"provider": "oci", "region": "r1", "credentialsRef": {"name": "c1"}},
                    {"provider": "aws", "region": "r2", "credentialsRef": {"name": "c2"},
                     "shape": "t3.micro"},
                ],
                "healthCheck": {"replacementTimeout": "1h30m"},
            }
        }
    )  # fmt: skip
    assert spec.provider_names == ("oci", "aws")
    assert spec.provider("aws") is not None and spec.provider("aws").shape == "t3.micro"  # type: ignore[union-attr]
    assert spec.replacement_timeout_seconds == 5400.0


def test_a_provider_listed_twice_is_rejected_naming_the_entry() -> None:
    slot = {"provider": "aws", "region": "r", "credentialsRef": {"name": "c"}}
    with pytest.raises(SpecError, match=r"'aws' twice") as raised:
        parse_spec({"spec": {"providers": [slot, slot]}})
    assert "spec.providers[1]" in raised.value.fix


@pytest.mark.parametrize(
    ("text", "seconds"), [("15m", 900), ("5s", 5), ("1h2m3s", 3723), ("250ms", 0.25)]
)
def test_go_durations_parse(text: str, seconds: float) -> None:
    assert parse_duration(text, "f") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "15", "m", "5 m", "1d", "abc"])
def test_a_bad_duration_names_the_field(text: str) -> None:
    with pytest.raises(SpecError, match=r"spec\.healthCheck\.replacementTimeout"):
        parse_duration(text, "spec.healthCheck.replacementTimeout")


def test_an_instance_always_carries_the_schema_required_keys_with_wire_names() -> None:
    entry = new_instance(instance_id="i-1", provider="aws", region="r")
    assert tuple(entry) == REQUIRED_INSTANCE_KEYS
    assert json.loads(json.dumps(entry))["publicIP"] == "" and entry["healthy"] is False


def test_placeholders_and_empty_ids_are_not_real_vms() -> None:
    assert not has_real_id({"id": "aws-provisioning", "provider": "aws"})
    assert not has_real_id({"id": "", "provider": "aws"})
    assert has_real_id({"id": "i-0abc", "provider": "aws"})


def test_the_state_and_condition_names_are_the_contract() -> None:
    assert STATES == (
        "provisioning", "healthy", "unhealthy", "draining", "quota-exhausted", "terminated",
        "provisioning-failed",
    )  # fmt: skip
    assert CONDITION_TYPES == (
        "Ready",
        "Degraded",
        "ProvisioningFailed",
        "Rotating",
        "FallbackActive",
    )
