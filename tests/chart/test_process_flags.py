"""The rendered container args are accepted by the real `wspin` parsers and settings checks.

This is the contract between the chart and the processes: a flag the chart renders but a
process does not know, or a value it would refuse at start, fails here instead of in a pod.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import pytest

from tests.chart.helm import NAMESPACE, PINS, RELEASE, Rendered, flag_values, render


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every flag also reads WSPIN_<FLAG> while the parser is built; only the args count here.
    for name in list(os.environ):
        if name.startswith("WSPIN_") or name == "LLMSAFESPACES_INTERNAL_TOKEN":
            monkeypatch.delenv(name)


def parse(rendered: Rendered, component: str) -> argparse.Namespace:
    from wspinctl.cli import build_parser

    container = rendered.container(component)
    assert container["command"] == ["wspin"]
    assert container["args"][0] == component
    return build_parser().parse_args(container["args"])


@pytest.mark.usefixtures("clean_environment")
def test_webhook_args_parse_and_pass_the_webhooks_settings_checks(any_render: Rendered) -> None:
    from webhook.settings import settings_from_args

    args = parse(any_render, "webhook")
    settings = settings_from_args(args)
    assert settings.serving.port == 8443
    assert settings.serving.metrics_port == 9090
    assert settings.agentd.image == flag_values(any_render.args("webhook"), "--agentd-image")[0]


@pytest.mark.usefixtures("clean_environment")
def test_webhook_certificate_flags_name_the_rendered_objects(any_render: Rendered) -> None:
    args = parse(any_render, "webhook")
    mutating_config = any_render.one("MutatingWebhookConfiguration")
    validating_config = any_render.one("ValidatingWebhookConfiguration")
    for config in (mutating_config, validating_config):
        # The serving certificate's DNS names derive from --service-name.
        assert config["webhooks"][0]["clientConfig"]["service"]["name"] == args.service_name
    any_render.get("Service", args.service_name)
    mutating = mutating_config["metadata"]["name"]
    validating = validating_config["metadata"]["name"]
    assert (args.mutating_webhook_name, args.validating_webhook_name) == (mutating, validating)
    if args.self_managed_certs:
        assert args.tls_cert_file is None and args.tls_key_file is None
        assert args.secret
    else:
        assert (args.tls_cert_file, args.tls_key_file) == (
            "/etc/wspin/tls/tls.crt",
            "/etc/wspin/tls/tls.key",
        )


@pytest.mark.usefixtures("clean_environment")
def test_controller_args_parse_and_pass_the_controllers_settings_checks(
    any_render: Rendered,
) -> None:
    from controller.settings import settings_from_args

    settings = settings_from_args(
        parse(any_render, "controller"), environ={"POD_NAMESPACE": "wspin"}
    )
    assert settings.runtime.health_port == 8081
    assert settings.runtime.metrics_port == 8080
    assert settings.runtime.leader_election.enabled is True
    assert settings.runtime.leader_election.name == "wspin-controller"


@pytest.mark.usefixtures("clean_environment")
def test_every_controller_value_reaches_its_setting(full_render: Rendered) -> None:
    from controller.settings import settings_from_args

    settings = settings_from_args(parse(full_render, "controller"), environ={})
    workspace = settings.workspace
    assert workspace.default_runtime_class == "gvisor"
    assert workspace.termination_grace == 40
    assert (
        workspace.api_service_url == "http://llmsafespaces-api.llmsafespaces.svc.cluster.local:8080"
    )
    assert workspace.api_public_url == "https://api.example.com"
    assert workspace.preview_origin_base_domain == "preview.example.com"
    egress = workspace.egress
    assert egress.dns_namespace == "dns-system"
    assert egress.dns_pod_labels == (("app.kubernetes.io/name", "coredns"), ("tier", "dns"))
    assert [str(a) for a in egress.dns_addresses] == ["169.254.20.10/32"]
    assert settings.relay_staging.enabled is True
    assert settings.relay_staging.namespace == "llm-relay"
    assert settings.relay_staging.token_ttl == 24 * 3600
    relay = settings.inference_relay
    assert relay.enabled is True
    store = relay.token_store
    assert store.aws_instance_profile == "arn:aws:iam::123456789012:instance-profile/relay-vm"
    assert store.aws_parameter_prefix == "/prod/relay-token"
    assert (store.oci_vault, store.oci_key) == (
        "ocid1.vault.oc1.iad.relay",
        "ocid1.key.oc1.iad.relay",
    )


@pytest.mark.usefixtures("clean_environment")
def test_every_webhook_value_reaches_its_setting(full_render: Rendered) -> None:
    from webhook.settings import settings_from_args

    settings = settings_from_args(parse(full_render, "webhook"))
    assert settings.insecure_registries == frozenset({"registry.internal:5000", "10.0.0.5:5000"})
    assert settings.agentd.binary_sha256_amd64 == "a" * 64
    assert settings.opencode.binary_sha256_arm64 == "d" * 64
    assert settings.validator.allowed_storage_classes == ("fast-ssd", "standard")
    assert settings.validator.allowed_runtime_registries == (
        "ghcr.io/acme/",
        "registry.internal:5000/runtimes/",
    )
    assert settings.validator.max_storage_gi == 1024
    limits = settings.serving.limits
    assert (limits.max_connections, limits.max_pipelined) == (4000, 8)
    assert (limits.max_buffered_body_bytes, limits.min_body_rate) == (128 * 2**20, 128 * 2**10)
    assert limits.max_queued_output_bytes == 96 * 2**20
    seconds = (limits.handshake_timeout, limits.header_timeout, limits.body_timeout)
    assert seconds == (10, 7.5, 8)
    assert (limits.idle_timeout, limits.send_timeout) == (300, 30)
    assert (limits.linger_timeout, limits.drain_timeout) == (3, 20)


def test_every_connection_flag_is_a_webhook_value_and_null_keeps_its_default(
    full_render: Rendered, default_render: Rendered
) -> None:
    import json
    import re

    from tests.chart.helm import CHART
    from wspin.http.settings import add_connection_flags

    parser = argparse.ArgumentParser(add_help=False)
    add_connection_flags(parser)
    flags = set(re.findall(r"--[a-z-]+", parser.format_usage()))
    schema = json.loads((CHART / "values.schema.json").read_text())
    keys = schema["properties"]["webhook"]["properties"]["connections"]["properties"]
    as_flags = {"--" + re.sub(r"[A-Z]", lambda c: "-" + c[0].lower(), key) for key in keys}
    assert as_flags == flags
    assert flags <= {arg.split("=")[0] for arg in full_render.args("webhook")}
    assert not flags & {arg.split("=")[0] for arg in default_render.args("webhook")}


@pytest.mark.usefixtures("clean_environment")
async def test_self_managed_certificate_flags_pass_the_certificate_checks(renders: Any) -> None:
    # The same call the webhook makes at start: a Secret or Service name it refuses exits 1.
    from kubernetes_asyncio.client import ApiClient, Configuration
    from prometheus_client import CollectorRegistry

    from certs.metrics import CertificateMetrics
    from certs.selfmanaged import SelfManagedSource
    from certs.settings import certificate_settings_from_args
    from certs.source import certificate_source
    from wspin.kube.client import Kube

    rendered = renders["selfManaged"]
    api = ApiClient(Configuration(host="https://127.0.0.1:1"))  # never called here
    try:
        settings = certificate_settings_from_args(parse(rendered, "webhook"))
        metrics = CertificateMetrics(CollectorRegistry())
        source = certificate_source(settings, Kube(api), NAMESPACE, metrics)
    finally:
        await api.close()
    assert isinstance(source, SelfManagedSource)
    service = rendered.one("MutatingWebhookConfiguration")["webhooks"][0]["clientConfig"]
    assert f"{service['service']['name']}.{NAMESPACE}.svc" in source.settings.policy.dns_names
    assert {target.name for target in source.settings.webhooks} == {
        rendered.one("MutatingWebhookConfiguration")["metadata"]["name"],
        rendered.one("ValidatingWebhookConfiguration")["metadata"]["name"],
    }
    # The Lease the replicas elect the certificate authority with is the one RBAC names.
    role = rendered.get("Role", "wspin-webhook")
    lease_names = {
        name
        for rule in role["rules"]
        if "leases" in rule["resources"]
        for name in rule.get("resourceNames", [])
    }
    assert lease_names == {source.leadership.lease.name}  # type: ignore[attr-defined]


@pytest.mark.usefixtures("clean_environment")
def test_both_processes_take_the_namespaces_the_pod_webhook_skips(any_render: Rendered) -> None:
    """One list: the injector's namespaceSelector, the Workspace validator, the controller."""
    from controller.settings import settings_from_args as controller_settings
    from webhook.settings import settings_from_args as webhook_settings

    (selector,) = [
        hook
        for hook in any_render.one("MutatingWebhookConfiguration")["webhooks"]
        if hook["name"] == "pods.wspin.llmsafespaces.dev"
    ]
    (expression,) = selector["namespaceSelector"]["matchExpressions"]
    skipped = set(expression["values"])
    assert {"kube-system", NAMESPACE} <= skipped
    environ = {"POD_NAMESPACE": NAMESPACE}  # the chart sets it from the pod's namespace
    webhook = webhook_settings(parse(any_render, "webhook"), environ=environ)
    assert webhook.validator.excluded_namespaces == skipped
    controller = controller_settings(parse(any_render, "controller"), environ=environ)
    assert controller.workspace.excluded_namespaces == skipped


@pytest.mark.usefixtures("clean_environment")
def test_the_platform_apis_namespace_hosts_workspaces_and_only_trusted_writers_write_there() -> (
    None
):
    """workspaces.namespace = the release namespace: API, controller and Workspaces together.
    The namespace leaves the excluded list of both processes and of the pod webhook, and
    the trusted writers (with the controller's service account) reach both processes."""
    from controller.settings import settings_from_args as controller_settings
    from webhook.settings import settings_from_args as webhook_settings

    api = "system:serviceaccount:llmsafespaces:llmsafespaces-api"
    rendered = render(
        sets={
            **PINS,
            "workspaces.namespace": NAMESPACE,
            "workspaces.trustedWriters": [api, "group:platform"],
            "workspaces.ownerRecordUpgrade": "hold",
        }
    )
    env = {"POD_NAMESPACE": NAMESPACE}
    validator = webhook_settings(parse(rendered, "webhook"), env).validator
    controller = controller_settings(parse(rendered, "controller"), env).workspace
    controller_sa = f"system:serviceaccount:{NAMESPACE}:{RELEASE}-controller"
    for settings in (validator, controller):
        assert settings.excluded_namespaces == {"kube-system"}
        assert settings.trusted_writers.users == {api, controller_sa}
        assert settings.trusted_writers.groups == {"platform"}
    assert validator.workspaces_namespace == NAMESPACE
    assert controller.owner_record_upgrade == "hold"
    (pods,) = [
        hook
        for hook in rendered.one("MutatingWebhookConfiguration")["webhooks"]
        if hook["name"] == "pods.wspin.llmsafespaces.dev"
    ]
    (expression,) = pods["namespaceSelector"]["matchExpressions"]
    assert expression["values"] == ["kube-system"]
    assert pods["objectSelector"]["matchLabels"] == {
        "app": "llmsafespaces",
        "component": "workspace",
    }
