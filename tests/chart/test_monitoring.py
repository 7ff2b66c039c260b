"""Optional Prometheus Operator objects: what they scrape and what the alerts watch."""

from __future__ import annotations

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
