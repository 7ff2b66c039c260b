"""Relay artifact settings are checked at start; each failure names its flag."""

from __future__ import annotations

import pytest

from controller.relay.artifact import artifact_sha256, validate_artifacts
from controller.settings import RelayArtifactConfig
from wspin.core.errors import ConfigError

GOOD = RelayArtifactConfig(("https://m.example/relay",), "a" * 64, "B" * 64)


def test_a_complete_configuration_passes() -> None:
    validate_artifacts(GOOD)


@pytest.mark.parametrize(
    ("config", "flag"),
    [
        (RelayArtifactConfig((), "a" * 64, "b" * 64), "--relay-artifact-url"),
        (RelayArtifactConfig(("ftp://m.example",), "a" * 64, "b" * 64), "--relay-artifact-url"),
        (
            RelayArtifactConfig(("https://m.example/a b",), "a" * 64, "b" * 64),
            "--relay-artifact-url",
        ),
        (RelayArtifactConfig(("m.example/relay",), "a" * 64, "b" * 64), "--relay-artifact-url"),
        # Anything the VM's download script would refuse is refused at start, not per VM.
        (
            RelayArtifactConfig(("https://m.example/it's",), "a" * 64, "b" * 64),
            "--relay-artifact-url",
        ),
        (
            RelayArtifactConfig(("https://m.example/$HOME",), "a" * 64, "b" * 64),
            "--relay-artifact-url",
        ),
        (
            RelayArtifactConfig(("https://m.example",), "", "b" * 64),
            "--relay-artifact-sha256-arm64",
        ),
        (
            RelayArtifactConfig(("https://m.example",), "a" * 63, "b" * 64),
            "--relay-artifact-sha256-arm64",
        ),
        (
            RelayArtifactConfig(("https://m.example",), "a" * 64, "g" * 64),
            "--relay-artifact-sha256-amd64",
        ),
        (
            RelayArtifactConfig(("https://m.example",), "a" * 64, ""),
            "--relay-artifact-sha256-amd64",
        ),
    ],
)
def test_each_broken_setting_exits_naming_its_flag(config: RelayArtifactConfig, flag: str) -> None:
    with pytest.raises(ConfigError) as raised:
        validate_artifacts(config)
    assert flag in str(raised.value)
    assert "controller.inferenceRelay.artifact" in raised.value.fix


def test_the_pin_for_an_architecture_is_lower_case() -> None:
    assert artifact_sha256(GOOD, "amd64") == "b" * 64
    assert artifact_sha256(GOOD, "arm64") == "a" * 64
