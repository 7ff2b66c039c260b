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


def test_relay_staging_renders_exactly_its_four_flags(full_render: Rendered) -> None:
    args = full_render.args("controller")
    staging = [a for a in args if a.startswith(("--relay-only", "--llm-relay", "--relay-token"))]
    assert staging == [
        "--relay-only-key-delivery=true",
        "--llm-relay-router-url=http://llm-relay-router.llm-relay.svc.cluster.local",
        "--llm-relay-namespace=llm-relay",
        "--relay-token-ttl=24h",
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
    assert {p["port"] for p in controller[1]["ports"]} == {443, 6443, 80, 8080}


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
