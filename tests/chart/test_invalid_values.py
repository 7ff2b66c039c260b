"""Values the processes would refuse, change or trip over at run time fail `helm install` instead,
and the bounds the chart accepts are exactly the bounds the processes accept."""

from __future__ import annotations

import os
from typing import Any

import pytest

from controller.staging.arming import MAX_TOKEN_TTL
from tests.chart.helm import Rendered, render, template


@pytest.mark.parametrize(
    ("sets", "named"),
    [
        # The controller would clamp it to 64 with only a log line: not what was asked for.
        ({"controller.maxConcurrentReconciles": 65}, "maxConcurrentReconciles"),
        ({"controller.workspaces.terminationGraceSeconds": 86401}, "terminationGraceSeconds"),
        # agentd needs 35 s to drain; the controller would refuse to start.
        ({"controller.workspaces.terminationGraceSeconds": 30}, "terminationGraceSeconds"),
        ({"controller.workspaces.ttlAction": "archive"}, "ttlAction"),
        (
            {"controller.inferenceRelay.orphanDetector.maxDeletionsPerSweep": 10001},
            "maxDeletionsPerSweep",
        ),
        # --insecure-registry refuses user@host: a registry is HOST:PORT only.
        ({"webhook.insecureRegistries": ["user@registry.internal:5000"]}, "insecureRegistries"),
        # Two servers on one port: the second bind fails in the pod.
        ({"webhook.metricsPort": 8443}, "webhook.metricsPort (8443) must differ from webhook.port"),
        (
            {"controller.metricsPort": 8081},
            "controller.metricsPort (8081) must differ from controller.healthPort",
        ),
        # Relay staging refuses to arm (exit 85) outside 1s..7d; a zero sweep interval exits 1.
        (
            {"controller.relayStaging.tokenTTL": "168h1s"},
            'controller.relayStaging.tokenTTL must be within 1s..168h (7 days), got "168h1s"',
        ),
        (
            {"controller.relayStaging.revocationStalenessBound": "5s"},
            "controller.relayStaging.revocationStalenessBound must be within 10s..1h",
        ),
        (
            {"controller.relayStaging.tokenTTL": "500ms"},
            "controller.relayStaging.tokenTTL must be within 1s..168h",
        ),
        (
            {"controller.workspaces.agent.healthInterval": "1s"},
            'controller.workspaces.agent.healthInterval must be within 5s..10m, got "1s"',
        ),
        (
            {"controller.workspaces.agent.statusInterval": "2h"},
            "controller.workspaces.agent.statusInterval must be within 15s..1h",
        ),
        (
            {"controller.workspaces.agent.drainStallBound": "30s"},
            "controller.workspaces.agent.drainStallBound must be within 1m..24h",
        ),
        ({"controller.workspaces.agent.scrapeConcurrency": 1025}, "scrapeConcurrency"),
        ({"webhook.connections.maxConnections": 0}, "maxConnections"),
        ({"webhook.connections.maxBufferedBodyBytes": 4194303}, "maxBufferedBodyBytes"),
        # The API server keeps idle connections 90 s; a shorter idle timeout races its reuse.
        ({"webhook.connections.idleTimeout": 90}, "idleTimeout"),
        ({"webhook.connections.headerTimeout": 0}, "headerTimeout"),
        ({"webhook.connections.drainTimeout": 301}, "drainTimeout"),
        # The port moved from relay staging to the agent settings: the old value is refused.
        ({"controller.relayStaging.agentdHealthPort": 4098}, "agentdHealthPort"),
        (
            {"controller.inferenceRelay.orphanDetector.sweepInterval": "0m0s"},
            "controller.inferenceRelay.orphanDetector.sweepInterval must be positive",
        ),
        # Without the Lease every replica reconciles and sweeps orphans at the same time.
        (
            {"controller.leaderElection": False, "controller.replicas": 2},
            "controller.leaderElection is required with more than one controller replica",
        ),
    ],
    ids=lambda value: next(iter(value)) if isinstance(value, dict) else None,
)
def test_a_value_the_process_cannot_run_with_fails_the_render_naming_it(
    sets: dict[str, Any], named: str
) -> None:
    # Over full.yaml: relay staging and InferenceRelay on, so their checks apply.
    result = template(("minimal.yaml", "full.yaml"), sets)
    assert result.returncode != 0, "the render should have failed"
    assert named in result.stderr


def test_one_controller_without_leader_election_renders() -> None:
    rendered = render(sets={"controller.leaderElection": False, "controller.replicas": 1})
    args = rendered.args("controller")
    assert "--enable-leader-election=false" in args


@pytest.fixture
def boundary_render(monkeypatch: pytest.MonkeyPatch) -> Rendered:
    for name in list(os.environ):
        if name.startswith("WSPIN_"):
            monkeypatch.delenv(name)
    return render(
        ("minimal.yaml", "full.yaml"),
        {
            "controller.maxConcurrentReconciles": 64,
            "controller.workspaces.terminationGraceSeconds": 86400,
            "controller.workspaces.ttlAction": "delete",
            "controller.inferenceRelay.orphanDetector.maxDeletionsPerSweep": 10000,
            "controller.relayStaging.tokenTTL": "167h59m60s",
            "controller.inferenceRelay.orphanDetector.sweepInterval": "1ms",
            "controller.workspaces.agent.scrapeConcurrency": 1024,
            "controller.workspaces.agent.healthInterval": "10m",
            "controller.workspaces.agent.statusInterval": "1h",
            "controller.workspaces.agent.drainStallBound": "24h",
        },
    )


def test_the_largest_values_the_chart_accepts_reach_the_controller_unchanged(
    boundary_render: Rendered,
) -> None:
    from controller.settings import settings_from_args
    from wspinctl.cli import build_parser

    args = build_parser().parse_args(boundary_render.args("controller"))
    settings = settings_from_args(args, environ={})
    assert settings.runtime.max_concurrent_reconciles == 64
    assert settings.workspace.termination_grace == 86400
    assert settings.workspace.ttl_action == "delete"
    assert settings.inference_relay.orphans.max_deletions_per_sweep == 10000
    assert settings.relay_staging.token_ttl == MAX_TOKEN_TTL  # arming's upper bound
    assert settings.inference_relay.orphans.interval == 0.001
    agent = settings.workspace.agent
    assert (agent.concurrency, agent.health_interval) == (1024, 600)
    assert (agent.status_interval, agent.drain_stall_bound) == (3600, 86400)


def test_the_widest_webhook_connection_values_the_chart_accepts_start_the_webhook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json

    from tests.chart.helm import CHART
    from webhook.settings import settings_from_args
    from wspinctl.cli import build_parser

    for name in list(os.environ):
        if name.startswith("WSPIN_"):
            monkeypatch.delenv(name)
    schema = json.loads((CHART / "values.schema.json").read_text())
    bounds = schema["properties"]["webhook"]["properties"]["connections"]["properties"]
    for edge in ("maximum", "minimum"):
        sets = {
            f"webhook.connections.{key}": bound.get(edge, bound.get("exclusiveMinimum", 0) + 0.5)
            for key, bound in bounds.items()
        }
        rendered = render(("minimal.yaml",), sets)
        limits = settings_from_args(build_parser().parse_args(rendered.args("webhook")))
        assert limits.serving.limits.max_connections == sets["webhook.connections.maxConnections"]
        assert limits.serving.limits.idle_timeout == sets["webhook.connections.idleTimeout"]


def test_a_long_drain_gets_a_termination_grace_it_fits_in() -> None:
    def grace(rendered: Rendered) -> Any:
        return rendered.deployment("webhook")["spec"]["template"]["spec"].get(
            "terminationGracePeriodSeconds"
        )

    assert grace(render(("minimal.yaml",))) is None  # the kubelet's 30 s hold 5 + 10
    assert grace(render(("minimal.yaml",), {"webhook.connections.drainTimeout": 12})) == 30
    # The 5 s shutdown delay, the drain, and 5 s for the process to exit.
    long_drain = render(("minimal.yaml",), {"webhook.connections.drainTimeout": 120.5})
    assert grace(long_drain) == 131
    assert "--drain-timeout=120.5" in long_drain.args("webhook")
