"""Optional Prometheus Operator objects: what they scrape and what the alerts watch."""

from __future__ import annotations

import yaml

from tests.chart.helm import NAMESPACE, REPO, Rendered, render


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


def test_the_agentd_pod_monitor_scrapes_the_admin_port_of_every_workspace_pod(
    full_render: Rendered, default_render: Rendered
) -> None:
    from wspin.core.workspace_pod import SELECTOR

    assert default_render.of_kind("PodMonitor") == []
    monitor = full_render.one("PodMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    spec = monitor["spec"]
    wanted = dict(pair.split("=") for pair in SELECTOR.split(","))
    assert spec["selector"] == {"matchLabels": wanted}
    assert spec["namespaceSelector"] == {"any": True}
    (endpoint,) = spec["podMetricsEndpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("agentd-admin", "/metrics")
    # The port is named on the pod the controller builds (the example is generated from the
    # pod builder and held current by its own test).
    pod = yaml.safe_load((REPO / "examples" / "workspace-pod.yaml").read_text())
    ports = {
        (port["name"], port["containerPort"])
        for container in pod["spec"]["containers"]
        for port in container.get("ports") or []
    }
    assert ("agentd-admin", 4098) in ports


def test_the_agentd_pod_monitor_can_be_limited_to_namespaces() -> None:
    rendered = render(
        sets={
            "monitoring.agentdPodMonitor.enabled": True,
            "monitoring.agentdPodMonitor.namespaces": ["team-a", "team-b"],
        }
    )
    assert rendered.one("PodMonitor")["spec"]["namespaceSelector"] == {
        "matchNames": ["team-a", "team-b"]
    }
