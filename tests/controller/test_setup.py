"""The controller's entry points wire the reconcilers into the manager, and fail loudly when
they cannot."""

from __future__ import annotations

import dataclasses

import pytest
from prometheus_client import generate_latest

import controller.setup as setup
from controller.runtime.manager import Manager
from controller.settings import ControllerSettings, InferenceRelaySettings, RelayArtifactConfig
from tests.controller.workspace.factories import TEST_KEYS
from wspin.core.errors import ConfigError
from wspin.kube.client import Kube

SHA_A, SHA_B = "a" * 64, "b" * 64


def registered(manager: Manager) -> set[str]:
    """Controllers the manager knows, as its metrics expose them."""
    text = generate_latest(manager.registry).decode()
    return {
        line.split('controller="')[1].split('"')[0]
        for line in text.splitlines()
        if line.startswith("wspin_controller_reconcile_errors_total{")
    }


def test_the_entry_point_names_are_all_importable_from_setup() -> None:
    for name in (
        "setup_controllers",
        "setup_relay_controller",
        "setup_relay_staging",
        "relay_staging_exit_code_for",
        "AgentdDelivery",
        "OpencodeDelivery",
        "RelayArtifactConfig",
        "ARMING_STARTUP_GUARD_WINDOW",
        "RELAY_STAGING_NOT_ARMED_EXIT_CODE",
    ):
        assert hasattr(setup, name), name
    assert setup.ARMING_STARTUP_GUARD_WINDOW == 30
    assert setup.RELAY_STAGING_NOT_ARMED_EXIT_CODE == 85
    fields = [f.name for f in dataclasses.fields(RelayArtifactConfig)]
    assert fields == ["urls", "sha256_arm64", "sha256_amd64"]


def test_setup_controllers_registers_the_workspace_controller(kube: Kube) -> None:
    manager = setup.new_manager(kube, ControllerSettings())
    setup.setup_controllers(manager, ControllerSettings(), credential_keys=TEST_KEYS)
    assert registered(manager) == {"workspace"}


def test_the_relay_controller_stays_out_when_disabled(kube: Kube) -> None:
    manager = setup.new_manager(kube, ControllerSettings())
    setup.setup_relay_controller(manager, ControllerSettings())
    assert registered(manager) == set()


def test_the_relay_controller_registers_when_enabled(kube: Kube) -> None:
    settings = ControllerSettings(
        inference_relay=InferenceRelaySettings(
            enabled=True,
            cloud="fake",
            artifact=RelayArtifactConfig(
                urls=("https://mirror.example/relay",), sha256_arm64=SHA_A, sha256_amd64=SHA_B
            ),
        )
    )
    manager = setup.new_manager(kube, settings)
    setup.setup_relay_controller(manager, settings)
    assert registered(manager) == {"inferencerelay"}


def test_an_enabled_relay_without_artifacts_is_a_config_error(kube: Kube) -> None:
    settings = ControllerSettings(
        inference_relay=InferenceRelaySettings(enabled=True, cloud="fake")
    )
    with pytest.raises(ConfigError):
        setup.setup_relay_controller(setup.new_manager(kube, settings), settings)
