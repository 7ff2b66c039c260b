"""Both Deployments: pod security, probes on the real endpoints, availability, network policy."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart.helm import Rendered, flag_values, render

COMPONENTS = ("webhook", "controller")
UID = 10001


def pod_specs(rendered: Rendered) -> list[tuple[str, dict[str, Any]]]:
    """Every pod the chart runs: both Deployments and the helm test pod."""
    specs = [
        (d["metadata"]["name"], d["spec"]["template"]["spec"])
        for d in rendered.of_kind("Deployment")
    ]
    specs += [(p["metadata"]["name"], p["spec"]) for p in rendered.of_kind("Pod")]
    return specs


def test_every_pod_runs_non_root_with_runtime_default_seccomp(any_render: Rendered) -> None:
    for name, spec in pod_specs(any_render):
        context = spec["securityContext"]
        assert context["runAsNonRoot"] is True, name
        assert context["runAsUser"] == UID, name
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, name


def test_every_container_is_read_only_unprivileged_and_drops_all_capabilities(
    any_render: Rendered,
) -> None:
    for name, spec in pod_specs(any_render):
        for container in spec["containers"] + spec.get("initContainers", []):
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["privileged"] is False, name
            assert context["capabilities"] == {"drop": ["ALL"]}, name
            assert container["resources"]["requests"], name
            assert container["resources"]["limits"]["memory"], name


def test_both_processes_get_their_namespace_from_the_downward_api(any_render: Rendered) -> None:
    for component in COMPONENTS:
        env = {e["name"]: e for e in any_render.container(component)["env"]}
        assert env["POD_NAMESPACE"]["valueFrom"] == {
            "fieldRef": {"fieldPath": "metadata.namespace"}
        }
        assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}


@pytest.mark.parametrize(
    ("component", "port_name", "flag"),
    [("webhook", "metrics", "--metrics-port"), ("controller", "health", "--health-port")],
)
def test_probes_hit_healthz_and_readyz_on_the_plain_http_port_the_process_serves(
    any_render: Rendered, component: str, port_name: str, flag: str
) -> None:
    container = any_render.container(component)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert flag_values(container["args"], flag) == [str(ports[port_name])]
    probes = {
        kind: container[kind]["httpGet"]
        for kind in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert probes["livenessProbe"] == {"path": "/healthz", "port": port_name}
    assert probes["startupProbe"] == {"path": "/healthz", "port": port_name}
    assert probes["readinessProbe"] == {"path": "/readyz", "port": port_name}
    assert "scheme" not in probes["readinessProbe"]  # plain HTTP, never the TLS admission port


def startup_budget(container: dict[str, Any]) -> float:
    """Seconds the kubelet waits for the first healthy /healthz before killing the container."""
    probe = container["startupProbe"]
    return float(
        probe.get("initialDelaySeconds", 0) + probe["periodSeconds"] * probe["failureThreshold"]
    )


def test_the_webhook_startup_probe_outlasts_pin_resolution_with_the_registry_unreachable(
    any_render: Rendered,
) -> None:
    # /healthz is served only once both artifacts are resolved, one after the other; a registry
    # whose packets are dropped costs the full timeout each before the pins cache is read. A
    # shorter budget kills the webhook just before it would have started from its cache.
    from webhook.server import PIN_RESOLUTION_TIMEOUT

    assert startup_budget(any_render.container("webhook")) >= 2 * PIN_RESOLUTION_TIMEOUT + 20


def test_the_controller_startup_probe_outlasts_relay_staging_arming(any_render: Rendered) -> None:
    # Arming (up to the guard window) runs before the manager serves /healthz.
    from controller.staging.arming import ARMING_STARTUP_GUARD_WINDOW

    assert startup_budget(any_render.container("controller")) >= ARMING_STARTUP_GUARD_WINDOW + 20


def test_the_controller_grace_period_covers_in_flight_reconciles_and_the_lease_release(
    any_render: Rendered,
) -> None:
    # After SIGTERM the manager gives reconciles graceful_shutdown_timeout, then releases the
    # Lease; a SIGKILL before that leaves the successor waiting out the whole lease duration.
    from controller.settings import RuntimeSettings

    spec = any_render.deployment("controller")["spec"]["template"]["spec"]
    grace = spec["terminationGracePeriodSeconds"]
    assert grace >= RuntimeSettings().graceful_shutdown_timeout + 10


def test_the_controller_serves_metrics_on_its_own_port(any_render: Rendered) -> None:
    container = any_render.container("controller")
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert flag_values(container["args"], "--metrics-port") == [str(ports["metrics"])]
    assert ports["metrics"] != ports["health"]


def test_the_webhook_runs_two_replicas_spread_over_nodes(default_render: Rendered) -> None:
    deployment = default_render.deployment("webhook")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    (term,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert (
        term["podAffinityTerm"]["labelSelector"]["matchLabels"]
        == deployment["spec"]["selector"]["matchLabels"]
    )


def test_hard_anti_affinity_requires_separate_nodes(full_render: Rendered) -> None:
    spec = full_render.deployment("webhook")["spec"]["template"]["spec"]
    (term,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"


def test_the_pdb_keeps_a_webhook_through_drains_without_blocking_them(
    any_render: Rendered,
) -> None:
    pdb = any_render.one("PodDisruptionBudget")
    deployment = any_render.deployment("webhook")
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert 1 <= pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]


def test_a_pdb_that_would_block_every_drain_fails_the_render() -> None:
    from tests.chart.helm import template

    result = template(sets={"webhook.replicas": 1})
    assert result.returncode != 0
    assert "webhook.podDisruptionBudget.minAvailable (1) must be below webhook.replicas (1)" in (
        result.stderr
    )


def test_the_controller_runs_with_leader_election(any_render: Rendered) -> None:
    assert flag_values(any_render.args("controller"), "--enable-leader-election") == ["true"]


def test_the_internal_token_comes_from_a_secret_reference(full_render: Rendered) -> None:
    env = {e["name"]: e for e in full_render.container("controller")["env"]}
    token = env["LLMSAFESPACES_INTERNAL_TOKEN"]
    assert "value" not in token
    assert token["valueFrom"] == {
        "secretKeyRef": {"name": "llmsafespaces-internal-token", "key": "token"}
    }


def test_a_literal_token_value_is_refused_by_the_values_schema() -> None:
    from tests.chart.helm import template

    result = template(sets={"controller.internalToken.value": "s3cr3t-token"})
    assert result.returncode != 0
    assert "s3cr3t-token" not in result.stdout
    assert "value" in result.stderr


def test_relay_staging_without_a_token_secret_fails_naming_the_value() -> None:
    from tests.chart.helm import template

    result = template(
        sets={
            "controller.relayStaging.enabled": True,
            "controller.apiServiceURL": "http://api:8080",
        }
    )
    assert result.returncode != 0
    assert "controller.internalToken.secretName is required" in result.stderr


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        ({}, "controller.inferenceRelay.artifact.urls"),
        (
            {"controller.inferenceRelay.artifact.urls": ["https://m.example.com/r"]},
            "sha256Amd64 and sha256Arm64 are both required",
        ),
    ],
)
def test_inference_relay_without_its_artifact_fails_naming_the_value(
    sets: dict[str, Any], message: str
) -> None:
    from tests.chart.helm import template

    result = template(sets={"controller.inferenceRelay.enabled": True, **sets})
    assert result.returncode != 0
    assert message in result.stderr


def test_relay_staging_renders_exactly_its_five_flags(full_render: Rendered) -> None:
    args = full_render.args("controller")
    prefixes = ("--relay-only", "--llm-relay", "--relay-token", "--relay-revocation")
    staging = [a for a in args if a.startswith(prefixes)]
    assert staging == [
        "--relay-only-key-delivery=true",
        "--llm-relay-router-url=http://llm-relay-router.llm-relay.svc.cluster.local",
        "--llm-relay-namespace=llm-relay",
        "--relay-token-ttl=24h",
        "--relay-revocation-staleness-bound=2m",
    ]


def test_the_agent_flags_render_from_their_values() -> None:
    from tests.chart.helm import render

    prefixes = ("--agentd-health", "--agent-", "--session-drain")
    defaults = [a for a in render().args("controller") if a.startswith(prefixes)]
    assert defaults == [
        "--agentd-health-port=4098",
        "--agent-scrape-concurrency=64",
        "--agent-health-interval=15s",
        "--agent-status-interval=1m",
        "--session-drain-stall-bound=1h",
    ]
    agent = {
        "controller.workspaces.agent.port": 9098,
        "controller.workspaces.agent.scrapeConcurrency": 256,
        "controller.workspaces.agent.healthInterval": "30s",
        "controller.workspaces.agent.statusInterval": "5m",
        "controller.workspaces.agent.drainStallBound": "2h",
    }
    args = render(sets=agent).args("controller")
    assert [a for a in args if a.startswith(prefixes)] == [
        "--agentd-health-port=9098",
        "--agent-scrape-concurrency=256",
        "--agent-health-interval=30s",
        "--agent-status-interval=5m",
        "--session-drain-stall-bound=2h",
    ]


def test_disabled_features_render_no_flags(default_render: Rendered) -> None:
    args = default_render.args("controller")
    assert not [a for a in args if "relay" in a or "orphan" in a]


def test_the_inference_relay_flags_carry_every_mirror(full_render: Rendered) -> None:
    args = full_render.args("controller")
    assert flag_values(args, "--relay-artifact-url") == [
        "https://mirror-a.example.com/relay/v0.1.0,https://mirror-b.example.com/relay/v0.1.0"
    ]
    assert flag_values(args, "--relay-cloud") == ["fake"]
    assert flag_values(args, "--orphan-dry-run") == ["true"]


def network_policy(rendered: Rendered, component: str) -> dict[str, Any]:
    return rendered.get("NetworkPolicy", f"wspin-{component}")


@pytest.mark.parametrize("component", COMPONENTS)
def test_each_network_policy_selects_its_pods_and_opens_only_their_ports(
    default_render: Rendered, component: str
) -> None:
    policy = network_policy(default_render, component)
    deployment = default_render.deployment(component)
    assert (
        policy["spec"]["podSelector"]["matchLabels"]
        == deployment["spec"]["selector"]["matchLabels"]
    )
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    opened = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    served = {p["name"] for p in default_render.container(component)["ports"]}
    assert opened == served


def test_egress_allows_dns_and_only_the_listed_ports(default_render: Rendered) -> None:
    webhook = network_policy(default_render, "webhook")["spec"]["egress"]
    ports = [{(p["port"], p["protocol"]) for p in rule["ports"]} for rule in webhook]
    assert ports == [{(53, "UDP"), (53, "TCP")}, {(443, "TCP"), (6443, "TCP")}]
    controller = network_policy(default_render, "controller")["spec"]["egress"]
    # The API server, the API service, and agentd's admin port in workspace pods.
    assert {p["port"] for p in controller[1]["ports"]} == {443, 6443, 80, 8080, 4098}


def egress_ports(rendered: Rendered, component: str) -> list[int]:
    dns, ports = network_policy(rendered, component)["spec"]["egress"]
    assert {p["port"] for p in dns["ports"]} == {53}
    return [p["port"] for p in ports["ports"]]


def test_the_webhook_may_reach_the_registry_port_of_each_image_and_insecure_registry() -> None:
    digest = "@sha256:" + "0123456789abcdef" * 4
    rendered = render(
        sets={
            "agentdDelivery.image": "registry.internal:5001/llm/agentd:v1" + digest,
            "webhook.insecureRegistries": ["mirror.internal:5002", "plain.internal"],
        }
    )
    # The pins are read from each image's registry; an insecure registry without a port is
    # plain HTTP on 80. Anything else stays closed.
    assert egress_ports(rendered, "webhook") == [443, 6443, 5001, 5002, 80]


def test_the_controller_may_reach_the_ports_of_the_urls_it_calls() -> None:
    rendered = render(
        ("minimal.yaml", "full.yaml"),
        {
            "controller.apiServiceURL": "http://api.llmsafespaces:8081",
            "controller.relayStaging.routerURL": "https://router.llm-relay:9443",
            "controller.inferenceRelay.routerURL": "http://relay-router:8080",
        },
    )
    # ... and agentd's health port in workspace pods, read by the relay staging pass.
    assert egress_ports(rendered, "controller") == [443, 6443, 80, 8080, 8081, 9443, 4098]


def test_metrics_scrapers_can_be_restricted(full_render: Rendered) -> None:
    for component in COMPONENTS:
        (metrics_rule,) = [
            r
            for r in network_policy(full_render, component)["spec"]["ingress"]
            if r["ports"][0]["port"] == "metrics"
        ]
        assert metrics_rule["from"] == [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ]


def test_network_policies_can_be_turned_off() -> None:
    assert render(sets={"networkPolicy.enabled": False}).of_kind("NetworkPolicy") == []


def test_image_digest_wins_over_the_tag() -> None:
    digest = "sha256:" + "e" * 64
    rendered = render(sets={"image.digest": digest, "image.tag": "0.9.0"})
    for component in COMPONENTS:
        assert rendered.container(component)["image"] == f"ghcr.io/llmsafespaces/wspin@{digest}"


def test_the_image_tag_defaults_to_the_app_version(default_render: Rendered) -> None:
    assert default_render.container("webhook")["image"] == "ghcr.io/llmsafespaces/wspin:0.1.0"


def test_yaml_special_characters_in_a_value_stay_inside_one_argument() -> None:
    url = "https://api.example.com/a#b:c,{d}&e*"
    args = render(sets={"controller.apiPublicURL": url}).args("controller")
    assert flag_values(args, "--api-public-url") == [url]


def test_no_pod_gets_service_link_variables_that_would_shadow_wspin_flags(
    any_render: Rendered, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kubelet turns every Service in the namespace into docker-link variables; a Service
    # named "wspin-metrics" becomes WSPIN_METRICS_PORT=tcp://…, the variable of --metrics-port,
    # and the webhook would refuse to start however its args are set.
    from wspin.core.errors import ConfigError
    from wspinctl.cli import build_parser

    monkeypatch.setenv("WSPIN_METRICS_PORT", "tcp://10.96.0.7:9090")
    with pytest.raises(ConfigError, match="WSPIN_METRICS_PORT"):
        build_parser()
    for name, spec in pod_specs(any_render):
        assert spec["enableServiceLinks"] is False, name
