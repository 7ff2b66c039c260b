"""``wspin controller`` flags to ``ControllerSettings``: defaults, env, errors naming the flag."""

from __future__ import annotations

import argparse
import os

import pytest

from controller.settings import (
    DEFAULT_LLM_RELAY_ROUTER_URL,
    ControllerSettings,
    add_controller_flags,
    settings_from_args,
)
from wspin.core.errors import ConfigError

DIGEST = "a" * 64
PIN = "b" * 64


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Flags read WSPIN_* at parser build time: start every test from a clean environment."""
    for name in list(os.environ):
        if name.startswith("WSPIN_") or name in ("POD_NAMESPACE", "POD_NAME"):
            monkeypatch.delenv(name)


def parse(*argv: str, environ: dict[str, str] | None = None) -> ControllerSettings:
    parser = argparse.ArgumentParser()
    add_controller_flags(parser)
    return settings_from_args(parser.parse_args(list(argv)), environ or {})


def test_defaults_match_the_documented_values() -> None:
    settings = parse()
    assert settings.runtime.health_port == 8081
    assert settings.runtime.metrics_port == 8080
    assert settings.runtime.max_concurrent_reconciles == 16
    assert settings.runtime.leader_election.enabled is False
    assert settings.runtime.leader_election.name == "wspin-controller"
    assert settings.workspace.termination_grace == 40
    assert settings.workspace.default_runtime_class is None
    assert settings.workspace.agentd is None and settings.workspace.opencode is None
    staging = settings.relay_staging
    assert (staging.enabled, staging.namespace, staging.token_ttl) == (False, "llm-relay", 86400)
    assert staging.router_url == DEFAULT_LLM_RELAY_ROUTER_URL
    relay = settings.inference_relay
    assert relay.enabled is False
    assert relay.router_url == "http://relay-router:8080"
    assert relay.cloud == ""
    assert (relay.orphans.interval, relay.orphans.grace) == (300, 600)
    assert relay.orphans.max_deletions_per_sweep == 10
    assert relay.orphans.dry_run is False


def test_agent_flags_reach_the_settings_the_scheduler_and_drains_read() -> None:
    defaults = parse().workspace.agent
    assert (defaults.port, defaults.concurrency) == (4098, 64)
    assert (defaults.health_interval, defaults.status_interval) == (15, 60)
    assert defaults.drain_stall_bound == 3600
    agent = parse(
        "--agentd-health-port=9098",
        "--agent-scrape-concurrency=8",
        "--agent-health-interval=30s",
        "--agent-status-interval=5m",
        "--session-drain-stall-bound=90m",
    ).workspace.agent
    assert (agent.port, agent.concurrency) == (9098, 8)
    assert (agent.health_interval, agent.status_interval) == (30, 300)
    assert agent.drain_stall_bound == 5400


def test_relay_staging_flags_reach_the_settings_the_caller_reads() -> None:
    settings = parse(
        "--relay-only-key-delivery=true",
        "--llm-relay-router-url=http://router.example:8090",
        "--llm-relay-namespace=relay-ns",
        "--relay-token-ttl=12h",
        "--relay-revocation-staleness-bound=30s",
        "--api-service-url=http://api:8080",
    )
    staging = settings.relay_staging
    assert staging.revocation_staleness_bound == 30
    assert staging.enabled is True
    assert staging.router_url == "http://router.example:8090"
    assert staging.namespace == "relay-ns"
    assert staging.token_ttl == 12 * 3600
    assert settings.workspace.api_service_url == "http://api:8080"


def test_a_bare_boolean_flag_turns_it_on() -> None:
    assert parse("--relay-only-key-delivery").relay_staging.enabled is True


def test_environment_variables_feed_flags_and_the_command_line_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WSPIN_RELAY_TOKEN_TTL", "90m")
    monkeypatch.setenv("WSPIN_ENABLE_LEADER_ELECTION", "true")
    monkeypatch.setenv("WSPIN_MAX_CONCURRENT_RECONCILES", "8")
    settings = parse("--max-concurrent-reconciles=2")
    assert settings.relay_staging.token_ttl == 5400
    assert settings.runtime.leader_election.enabled is True
    assert settings.runtime.max_concurrent_reconciles == 2


def test_an_out_of_range_token_ttl_is_left_for_arming_to_refuse() -> None:
    # Arming owns the 1s..7d rule (exit 85); settings only insist it is a duration.
    assert parse("--relay-token-ttl=192h").relay_staging.token_ttl == 192 * 3600


def test_default_runtime_class_distinguishes_unset_from_explicitly_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert parse().workspace.default_runtime_class is None
    assert parse("--default-runtime-class=").workspace.default_runtime_class == ""
    assert parse("--default-runtime-class=gvisor").workspace.default_runtime_class == "gvisor"
    monkeypatch.setenv("WSPIN_DEFAULT_RUNTIME_CLASS", "")
    assert parse().workspace.default_runtime_class == ""


@pytest.mark.parametrize(("given", "used"), [("0", 1), ("-3", 1), ("64", 64), ("500", 64)])
def test_max_concurrent_reconciles_is_clamped_to_1_to_64(given: str, used: int) -> None:
    settings = parse(f"--max-concurrent-reconciles={given}")
    assert settings.runtime.max_concurrent_reconciles == used


def test_internal_token_comes_from_the_environment_only_and_stays_out_of_repr() -> None:
    settings = parse(environ={"LLMSAFESPACES_INTERNAL_TOKEN": "s3cr3t-internal"})
    assert settings.api_internal_token == "s3cr3t-internal"
    assert "s3cr3t-internal" not in repr(settings)


def test_pod_namespace_sets_the_lease_namespace_and_identity_is_unique() -> None:
    first = parse(environ={"POD_NAMESPACE": "wspin-system", "POD_NAME": "ctrl-0"})
    second = parse(environ={"POD_NAMESPACE": "wspin-system", "POD_NAME": "ctrl-0"})
    election = first.runtime.leader_election
    assert election.namespace == "wspin-system" == first.namespace
    assert election.identity.startswith("ctrl-0_")
    assert election.identity != second.runtime.leader_election.identity


def test_relay_artifact_urls_are_a_trimmed_comma_list() -> None:
    settings = parse(
        "--relay-artifact-url= https://a.example/relay , https://b.example/relay,,",
        f"--relay-artifact-sha256-amd64={PIN}",
        f"--relay-artifact-sha256-arm64={DIGEST}",
        "--relay-cloud=fake",
        "--orphan-sweep-interval=1m",
        "--orphan-grace=30s",
        "--orphan-dry-run",
    )
    relay = settings.inference_relay
    assert relay.artifact.urls == ("https://a.example/relay", "https://b.example/relay")
    assert (relay.artifact.sha256_amd64, relay.artifact.sha256_arm64) == (PIN, DIGEST)
    assert relay.cloud == "fake"
    assert (relay.orphans.interval, relay.orphans.grace, relay.orphans.dry_run) == (60, 30, True)


def test_delivery_flags_are_optional_but_validated_when_given() -> None:
    settings = parse(f"--agentd-image=reg.example/agentd@sha256:{DIGEST}")
    assert settings.workspace.agentd is not None
    assert settings.workspace.agentd.image.endswith(DIGEST)
    assert settings.workspace.opencode is None
    with pytest.raises(ConfigError, match="--opencode-image must be pinned by digest"):
        parse("--opencode-image=reg.example/opencode:latest")


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--health-port=http"], "--health-port"),
        (["--metrics-port=70000"], "--metrics-port"),
        (["--health-port=9000", "--metrics-port=9000"], "--metrics-port"),
        (["--log-level=loud"], "--log-level"),
        (["--max-concurrent-reconciles=many"], "--max-concurrent-reconciles"),
        (["--relay-token-ttl=1d"], "--relay-token-ttl"),
        (["--relay-revocation-staleness-bound=5s"], "--relay-revocation-staleness-bound"),
        (["--relay-revocation-staleness-bound=2h"], "--relay-revocation-staleness-bound"),
        (["--relay-revocation-staleness-bound=soon"], "--relay-revocation-staleness-bound"),
        (["--agentd-health-port=0"], "--agentd-health-port"),
        (["--agent-scrape-concurrency=0"], "--agent-scrape-concurrency"),
        (["--agent-scrape-concurrency=2000"], "--agent-scrape-concurrency"),
        (["--agent-health-interval=1s"], "--agent-health-interval"),
        (["--agent-health-interval=often"], "--agent-health-interval"),
        (["--agent-status-interval=2h"], "--agent-status-interval"),
        (["--session-drain-stall-bound=30s"], "--session-drain-stall-bound"),
        (["--session-drain-stall-bound=2d"], "--session-drain-stall-bound"),
        (["--relay-only-key-delivery=maybe"], "--relay-only-key-delivery"),
        (["--enable-leader-election=yes please"], "--enable-leader-election"),
        (["--relay-cloud=gcp"], "--relay-cloud"),
        (["--orphan-sweep-interval=0s"], "--orphan-sweep-interval"),
        (["--orphan-grace=soon"], "--orphan-grace"),
        (["--orphan-max-deletions-per-sweep=-1"], "--orphan-max-deletions-per-sweep"),
        (["--workspace-termination-grace=forever"], "--workspace-termination-grace"),
        (["--workspace-termination-grace-seconds=35"], "--workspace-termination-grace-seconds"),
        (["--workspace-ttl-action=archive"], "--workspace-ttl-action"),
    ],
)
def test_invalid_values_raise_a_config_error_naming_the_flag_and_its_env(
    argv: list[str], flag: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(*argv)
    text = str(caught.value)
    assert text.startswith(flag)
    assert "WSPIN_" + flag.lstrip("-").replace("-", "_").upper() in text


def test_an_invalid_boolean_in_the_environment_is_a_config_error_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WSPIN_ORPHAN_DRY_RUN", "perhaps")
    with pytest.raises(ConfigError, match="--orphan-dry-run"):
        parse()


def test_lease_timings_can_be_shortened_from_the_environment_only() -> None:
    defaults = parse().runtime.leader_election
    assert (defaults.lease_duration, defaults.renew_deadline, defaults.retry_period) == (15, 10, 2)
    short = parse(
        environ={
            "WSPIN_LEASE_DURATION": "2s",
            "WSPIN_RENEW_DEADLINE": "1500ms",
            "WSPIN_RETRY_PERIOD": "200ms",
        }
    ).runtime.leader_election
    assert (short.lease_duration, short.renew_deadline, short.retry_period) == (2, 1.5, 0.2)


@pytest.mark.parametrize(
    "environ",
    [
        {"WSPIN_LEASE_DURATION": "soon"},
        {"WSPIN_LEASE_DURATION": "5s"},  # below the 10 s renew deadline
        {"WSPIN_RETRY_PERIOD": "9s"},
    ],
)
def test_bad_lease_timings_are_a_config_error_naming_the_variables(
    environ: dict[str, str],
) -> None:
    with pytest.raises(ConfigError, match="WSPIN_"):
        parse(environ=environ)


def test_side_servers_bind_every_interface_unless_a_free_port_is_asked_for() -> None:
    assert parse().runtime.bind_host is None
    assert parse("--health-port=0").runtime.bind_host == "127.0.0.1"


def test_orphan_regions_and_the_cluster_id_reach_the_relay_settings() -> None:
    relay = parse().inference_relay
    assert relay.orphans.regions == (("aws", "us-east-1"), ("oci", "us-ashburn-1"))
    assert relay.cluster_id == ""
    relay = parse(
        "--orphan-regions=aws:eu-west-1, aws:eu-west-1,oci:eu-frankfurt-1",
        "--relay-cluster-id=prod-eu-1",
    ).inference_relay
    assert relay.orphans.regions == (("aws", "eu-west-1"), ("oci", "eu-frankfurt-1"))
    assert relay.cluster_id == "prod-eu-1"
    assert parse("--orphan-regions=").inference_relay.orphans.regions == ()


@pytest.mark.parametrize("bad", ["us-east-1", "aws:", ":us-east-1", "aws:US East", "a:b:c"])
def test_a_malformed_orphan_region_names_the_flag_and_the_helm_value(bad: str) -> None:
    with pytest.raises(ConfigError, match="--orphan-regions") as raised:
        parse(f"--orphan-regions={bad}")
    assert "controller.inferenceRelay.orphanDetector.regions" in raised.value.fix


IMAGE = "ghcr.io/example/agentd@sha256:" + DIGEST


@pytest.mark.parametrize(
    ("argv", "ok"),
    [
        ((), True),
        ((f"--agentd-image={IMAGE}",), True),
        (("--agentd-sidecar=false",), True),
        ((f"--agentd-image={IMAGE}", "--agentd-sidecar"), True),
        (("--agentd-sidecar",), False),
    ],
)
def test_the_sidecar_needs_the_agentd_image(argv: tuple[str, ...], ok: bool) -> None:
    if ok:
        settings = parse(*argv)
        assert settings.workspace.agentd_sidecar == ("--agentd-sidecar" in argv)
        return
    with pytest.raises(ConfigError) as caught:
        parse(*argv)
    assert "--agentd-image" in str(caught.value)
    assert "--agentd-sidecar" in str(caught.value)


def test_the_sidecar_and_opencode_delivery_do_not_gate_each_other() -> None:
    opencode = "ghcr.io/example/opencode@sha256:" + DIGEST
    settings = parse(f"--agentd-image={IMAGE}", "--agentd-sidecar", f"--opencode-image={opencode}")
    assert settings.workspace.agentd_sidecar and settings.workspace.opencode is not None


def test_upload_staging_knobs_are_parsed_and_rendered_back_as_env() -> None:
    staging = parse("--upload-staging=budget=100,floor=0,ttlMs=900000").workspace.upload_staging
    assert staging.flag_value() == "budget=100,floor=0,ttlMs=900000"
    assert staging.env() == [
        {"name": "UPLOAD_STAGING_BUDGET", "value": "100"},
        {"name": "UPLOAD_STAGING_CREDENTIAL_FLOOR", "value": "0"},
        {"name": "UPLOAD_STAGING_TTL_MS", "value": "900000"},
    ]
    assert parse().workspace.upload_staging.env() == []


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("budget", "want key=value"),
        ("budgte=1", "unknown key"),
        ("budget=1,budget=2", "given twice"),
        ("budget=0", "positive"),
        ("floor=-1", "0 or more"),
        ("concurrent=x", "whole number"),
        ("ttlMs=60000", "must exceed the apply bound"),
        ("applyTimeoutMs=900000", "must exceed the apply bound"),
    ],
)
def test_bad_upload_staging_knobs_are_a_config_error_naming_the_flag(
    value: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(f"--upload-staging={value}")
    assert "--upload-staging" in str(caught.value) and fragment in str(caught.value)


@pytest.mark.parametrize(
    ("argv", "action"), [([], "terminate"), (["--workspace-ttl-action=delete"], "delete")]
)
def test_a_workspace_past_its_ttl_is_kept_as_terminated_unless_deletion_is_asked(
    argv: list[str], action: str
) -> None:
    assert parse(*argv).workspace.ttl_action == action


@pytest.mark.parametrize(
    ("argv", "grace"),
    [
        ([], 40),
        (["--workspace-termination-grace-seconds=120"], 120),
        (["--workspace-termination-grace=90"], 90),  # the former name still works
        (["--workspace-termination-grace=90", "--workspace-termination-grace-seconds=60"], 60),
        (["--workspace-termination-grace-seconds=36"], 36),
    ],
)
def test_the_termination_grace_is_40_by_default_and_takes_either_name(
    argv: list[str], grace: int
) -> None:
    assert parse(*argv).workspace.termination_grace == grace


@pytest.mark.parametrize(
    "flag", ["--workspace-termination-grace-seconds", "--workspace-termination-grace"]
)
@pytest.mark.parametrize("value", ["30", "0"])
def test_a_termination_grace_too_short_for_agentd_is_refused_naming_the_flag_and_value(
    flag: str, value: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(f"{flag}={value}")
    text = str(caught.value)
    assert text.startswith(flag) and "at least 36" in text
    assert "controller.workspaces.terminationGraceSeconds" in text
