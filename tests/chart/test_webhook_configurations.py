"""The two webhook configurations, the three certificate modes, and uninstall."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart.conftest import PROVIDED_CA
from tests.chart.helm import NAMESPACE, Rendered, flag_values, template
from webhook.app import MUTATE_PODS_PATH, VALIDATE_TENANT_QUOTA_PATH, VALIDATE_WORKSPACES_PATH
from wspin.core.workspace_pod import SELECTOR, SELECTOR_LABELS


def pod_webhook(rendered: Rendered) -> dict[str, Any]:
    return mutating_webhook(rendered, "pods.wspin.llmsafespaces.dev")


def mutating_webhook(rendered: Rendered, name: str) -> dict[str, Any]:
    webhooks = rendered.one("MutatingWebhookConfiguration")["webhooks"]
    (webhook,) = [w for w in webhooks if w["name"] == name]
    return webhook  # type: ignore[no-any-return]


def validating_webhook(rendered: Rendered, name: str) -> dict[str, Any]:
    webhooks = rendered.one("ValidatingWebhookConfiguration")["webhooks"]
    (webhook,) = [w for w in webhooks if w["name"] == name]
    return webhook  # type: ignore[no-any-return]


def workspace_webhook(rendered: Rendered) -> dict[str, Any]:
    return validating_webhook(rendered, "workspaces.wspin.llmsafespaces.dev")


def test_the_tenant_quota_webhook_registers_only_with_a_limit(any_render: Rendered) -> None:
    names = [w["name"] for w in any_render.one("ValidatingWebhookConfiguration")["webhooks"]]
    assert names in (
        ["workspaces.wspin.llmsafespaces.dev"],
        ["workspaces.wspin.llmsafespaces.dev", "tenant-quota.wspin.llmsafespaces.dev"],
    )


def test_the_tenant_quota_webhook_sees_every_workspace_pod_create(
    full_render: Rendered,
) -> None:
    webhook = validating_webhook(full_render, "tenant-quota.wspin.llmsafespaces.dev")
    assert webhook["clientConfig"]["service"]["path"] == VALIDATE_TENANT_QUOTA_PATH
    assert [r["operations"] for r in webhook["rules"]] == [["CREATE"]]
    assert webhook["failurePolicy"] == "Fail"
    # The tenant is the namespace's label: no pod label can keep a pod from the quota.
    assert webhook["objectSelector"] == {"matchLabels": dict(SELECTOR_LABELS)}
    excluded = webhook["namespaceSelector"]["matchExpressions"][0]["values"]
    assert {"kube-system", NAMESPACE, "monitoring"} <= set(excluded)
    assert flag_values(full_render.args("webhook"), "--max-workspaces-per-tenant") == ["5"]


def test_pod_webhook_intercepts_pod_create_only_and_fails_closed(any_render: Rendered) -> None:
    webhook = pod_webhook(any_render)
    assert webhook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    assert webhook["failurePolicy"] == "Fail"
    assert webhook["timeoutSeconds"] == 5
    assert webhook["reinvocationPolicy"] == "IfNeeded"
    assert webhook["sideEffects"] == "None"
    assert webhook["admissionReviewVersions"] == ["v1"]


def test_pod_webhook_selects_only_labelled_workspace_pods(default_render: Rendered) -> None:
    # The one definition of a workspace pod, shared with the injector and the controller.
    assert pod_webhook(default_render)["objectSelector"] == {"matchLabels": dict(SELECTOR_LABELS)}
    assert SELECTOR == "app=llmsafespaces,component=workspace"


def excluded(rendered: Rendered) -> list[str]:
    (expression,) = pod_webhook(rendered)["namespaceSelector"]["matchExpressions"]
    assert (expression["key"], expression["operator"]) == ("kubernetes.io/metadata.name", "NotIn")
    return expression["values"]  # type: ignore[no-any-return]


def test_pod_webhook_never_sees_kube_system_or_its_own_namespace(default_render: Rendered) -> None:
    assert excluded(default_render) == ["kube-system", NAMESPACE]


def test_extra_excluded_namespaces_are_added(full_render: Rendered) -> None:
    assert excluded(full_render) == ["kube-system", NAMESPACE, "monitoring"]


def test_workspace_validator_covers_create_and_update_of_the_main_resource_only(
    any_render: Rendered,
) -> None:
    webhook = workspace_webhook(any_render)
    (rule,) = webhook["rules"]
    assert rule["apiGroups"] == ["llmsafespaces.dev"]
    assert rule["operations"] == ["CREATE", "UPDATE"]
    assert rule["resources"] == ["workspaces"]
    assert webhook["failurePolicy"] == "Fail"
    assert webhook["sideEffects"] == "None"


@pytest.mark.parametrize(
    ("which", "path"),
    # The paths the webhook's app really routes.
    [(pod_webhook, MUTATE_PODS_PATH), (workspace_webhook, VALIDATE_WORKSPACES_PATH)],
)
def test_both_webhooks_call_the_webhook_service_on_its_https_port(
    any_render: Rendered, which: Any, path: str
) -> None:
    service_ref = which(any_render)["clientConfig"]["service"]
    assert service_ref["path"] == path
    assert service_ref["namespace"] == NAMESPACE
    service = any_render.get("Service", service_ref["name"])
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == service_ref["port"]]
    assert port["targetPort"] == "https"
    container_ports = {
        p["name"]: p["containerPort"] for p in any_render.container("webhook")["ports"]
    }
    assert flag_values(any_render.args("webhook"), "--port") == [str(container_ports["https"])]
    assert (
        service["spec"]["selector"]
        == any_render.deployment("webhook")["spec"]["selector"]["matchLabels"]
    )


def test_self_managed_mode_leaves_the_ca_bundle_to_the_webhook(default_render: Rendered) -> None:
    args = default_render.args("webhook")
    assert "--self-managed-certs" in args
    assert flag_values(args, "--secret") == ["wspin-webhook-tls"]
    for webhook in (pod_webhook(default_render), workspace_webhook(default_render)):
        assert "caBundle" not in webhook["clientConfig"]
    assert default_render.of_kind("Certificate") == []
    volumes = default_render.deployment("webhook")["spec"]["template"]["spec"]["volumes"]
    assert [v["name"] for v in volumes] == ["tmp"]


def mounted_secret(rendered: Rendered) -> str:
    spec = rendered.deployment("webhook")["spec"]["template"]["spec"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == "tls"]
    (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "tls"]
    assert mount == {"name": "tls", "mountPath": "/etc/wspin/tls", "readOnly": True}
    assert "--self-managed-certs" not in rendered.args("webhook")
    return volume["secret"]["secretName"]  # type: ignore[no-any-return]


def test_cert_manager_mode_issues_the_mounted_secret_and_injects_the_ca(renders: Any) -> None:
    rendered = renders["certManager"]
    certificates = {c["metadata"]["name"]: c for c in rendered.of_kind("Certificate")}
    serving = certificates["wspin-webhook"]
    assert serving["spec"]["secretName"] == mounted_secret(rendered)
    assert serving["spec"]["dnsNames"] == [
        f"wspin-webhook.{NAMESPACE}.svc",
        f"wspin-webhook.{NAMESPACE}.svc.cluster.local",
    ]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = rendered.one(kind)["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/wspin-webhook"
    # Without an issuer given, a private CA chain for this release: selfSigned → CA → serving.
    issuer = rendered.get("Issuer", serving["spec"]["issuerRef"]["name"])
    ca = certificates[f"{issuer['metadata']['name']}"]
    assert issuer["spec"]["ca"]["secretName"] == ca["spec"]["secretName"]
    assert ca["spec"]["isCA"] is True
    assert rendered.get("Issuer", ca["spec"]["issuerRef"]["name"])["spec"] == {"selfSigned": {}}


def test_cert_manager_mode_uses_a_given_issuer_without_creating_one(renders: Any) -> None:
    rendered = renders["certManager-issuer"]
    serving = rendered.one("Certificate")
    assert serving["spec"]["issuerRef"] == {"kind": "ClusterIssuer", "name": "internal-ca"}
    assert rendered.of_kind("Issuer") == []


def test_provided_mode_mounts_the_named_secret_and_publishes_the_given_ca(renders: Any) -> None:
    rendered = renders["provided"]
    assert mounted_secret(rendered) == "my-webhook-tls"
    for webhook in (pod_webhook(rendered), workspace_webhook(rendered)):
        assert webhook["clientConfig"]["caBundle"] == PROVIDED_CA
    assert rendered.of_kind("Certificate") == []


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            {"certificates.mode": "provided", "certificates.caBundle": PROVIDED_CA},
            "certificates.secretName is required",
        ),
        (
            {"certificates.mode": "provided", "certificates.secretName": "tls"},
            "certificates.caBundle is required",
        ),
        (
            {
                "certificates.mode": "provided",
                "certificates.secretName": "tls",
                "certificates.caBundle": "not base64!",
            },
            "certificates.caBundle",
        ),
    ],
)
def test_provided_mode_without_its_values_fails_naming_them(
    sets: dict[str, str], message: str
) -> None:
    result = template(sets=sets)
    assert result.returncode != 0
    assert message in result.stderr


def test_uninstall_removes_both_webhook_configurations(any_render: Rendered) -> None:
    # Plain release objects: not hooks (Helm never deletes hook objects on uninstall) and not
    # kept by a resource policy, so `helm uninstall` deletes them.
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = any_render.one(kind)["metadata"].get("annotations") or {}
        assert not any(key.startswith("helm.sh/") for key in annotations)


def test_webhook_configuration_names_are_unique_per_release_namespace() -> None:
    other = template(namespace="wspin-canary")
    assert other.returncode == 0
    assert "name: wspin-webhook-wspin-canary\n" in other.stdout


def test_status_subresource_writes_are_not_sent_because_the_validator_allows_them_unchecked(
    any_render: Rendered,
) -> None:
    # Sending them would only make every controller status write depend on the webhook.
    from webhook.validate import ValidatorConfig, validate_workspace

    status_write = {
        "operation": "UPDATE",
        "subResource": "status",
        "object": {"spec": {"runtime": "../../etc"}, "status": {"phase": "Active"}},
        "oldObject": {"spec": {}, "status": {}},
    }
    assert validate_workspace(status_write, ValidatorConfig()) is None
    resources = {r for rule in workspace_webhook(any_render)["rules"] for r in rule["resources"]}
    assert "workspaces/status" not in resources
