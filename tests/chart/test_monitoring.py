"""Optional Prometheus Operator objects: what they scrape and what the alerts watch."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry

from tests.chart.helm import NAMESPACE, Rendered


def test_monitoring_objects_are_off_by_default(default_render: Rendered) -> None:
    assert default_render.of_kind("ServiceMonitor") == []
    assert default_render.of_kind("PrometheusRule") == []


def test_a_service_monitor_per_component_scrapes_its_metrics_service(full_render: Rendered) -> None:
    monitors = full_render.of_kind("ServiceMonitor")
    assert len(monitors) == 2
    for monitor in monitors:
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        (endpoint,) = monitor["spec"]["endpoints"]
        assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")
        selector = monitor["spec"]["selector"]["matchLabels"]
        services = [
            s
            for s in full_render.of_kind("Service")
            if selector.items() <= s["metadata"]["labels"].items()
        ]
        assert len(services) == 1, monitor["metadata"]["name"]
        assert "metrics" in {p["name"] for p in services[0]["spec"]["ports"]}


def alerts(rendered: Rendered) -> dict[str, dict[str, object]]:
    (group,) = rendered.one("PrometheusRule")["spec"]["groups"]
    return {rule["alert"]: rule for rule in group["rules"]}


def test_alerts_cover_verify_failures_certificate_expiry_and_webhook_errors(
    full_render: Rendered,
) -> None:
    rules = alerts(full_render)
    assert set(rules) == {
        "LLMSafeSpacesAgentdVerificationFailed",
        "LLMSafeSpacesOpencodeVerificationFailed",
        "WspinWebhookCertificateExpiring",
        "WspinWebhookInvalidRequests",
        "WspinWebhookCallsFailing",
        "WspinWebhookDown",
    }
    expiry = str(rules["WspinWebhookCertificateExpiring"]["expr"])
    assert expiry.endswith("< 1209600")  # certificateExpiryDays 14, in seconds
    for rule in rules.values():
        assert rule["labels"]["severity"] in {"warning", "critical"}  # type: ignore[index]
        # Alert templates survive Helm: Prometheus, not Helm, fills in $labels.
        assert "{{ $labels" in str(rule["annotations"]) or "$labels" not in str(rule["annotations"])


def exported_metric_names() -> set[str]:
    """Sample names the wspin processes really export, from their own metric definitions."""
    from certs.metrics import CertificateMetrics
    from controller.workspace.metrics import VerifyMetrics
    from webhook.metrics import AdmissionMetrics

    registry = CollectorRegistry()
    CertificateMetrics(registry)
    AdmissionMetrics(registry)
    VerifyMetrics(registry)
    names = set()
    for family in registry.collect():
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "histogram":
            names |= {family.name + suffix for suffix in ("_bucket", "_count", "_sum")}
        else:
            names.add(family.name)
    return names


def test_every_wspin_metric_an_alert_uses_is_exported_by_the_processes(
    full_render: Rendered,
) -> None:
    used = {
        name
        for rule in alerts(full_render).values()
        for name in re.findall(r"\bwspin_[a-z0-9_]+", str(rule["expr"]))
    }
    assert used
    assert used <= exported_metric_names(), used - exported_metric_names()
