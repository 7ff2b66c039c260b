"""Every metric an alert or a dashboard panel names is one the processes export: read from the
live /metrics of both processes, every optional part on, not from our own lists of names."""

from __future__ import annotations

from pathlib import Path

from tests.chart.alert_rules import alerts
from tests.chart.dashboards import queries, rendered_dashboards
from tests.chart.helm import render
from tests.chart.promql import metric_names
from tests.controller.conftest import CredentialSource, FakeRouter
from tests.monitoring import processes
from wspin.kube.client import Kube

# Series that come from elsewhere: Prometheus's own scrape health, and kube-apiserver's
# admission webhook metrics (stable names since Kubernetes 1.16-1.23).
EXTERNAL = {
    "up",
    "apiserver_admission_webhook_rejection_count",
    "apiserver_admission_webhook_admission_duration_seconds_bucket",
}


def self_managed_only() -> set[str]:
    """The CA-rotation gauges: a webhook registers them only in self-managed mode, which needs
    webhook configurations to publish its CA in; read from the gauges themselves."""
    from prometheus_client import CollectorRegistry

    from certs.metrics import CertificateMetrics

    metrics = CertificateMetrics(CollectorRegistry())
    return {
        family.name
        for gauge in (metrics.rotation_held, metrics.rotation_lagging)
        for family in gauge.describe()
    }


async def test_every_metric_the_alerts_and_dashboards_name_is_exported_by_a_running_process(
    tmp_path: Path,
    kube: Kube,
    namespace: str,
    kubeconfig: Path,
    router: FakeRouter,
    credentials: CredentialSource,
) -> None:
    async with (
        processes.webhook(tmp_path, kubeconfig, namespace) as webhook_url,
        processes.controller(kube, namespace, kubeconfig, router, credentials) as controller_url,
    ):
        exported = processes.sample_names(await processes.get_text(webhook_url))
        exported |= processes.sample_names(await processes.get_text(controller_url))
    exported |= self_managed_only()
    for family in ("llmsafespaces_workspaces", "llmsafespaces_relay_desired_instances"):
        assert family in exported, family
    full = render(("minimal.yaml", "full.yaml"))
    named = {name for rule in alerts(full).values() for name in metric_names(rule["expr"])}
    assert {"wspin_controller_reconcile_errors_total", "up"} <= named
    assert named - EXTERNAL <= exported, sorted(named - EXTERNAL - exported)
    for query in queries(rendered_dashboards(full)):
        unknown = metric_names(query.expr) - EXTERNAL - exported
        assert not unknown, f"{query.dashboard} / {query.panel}: {sorted(unknown)}"
