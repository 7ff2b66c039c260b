"""The relay controller's metrics: one name each, prefix ``llmsafespaces_relay_``."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from controller.relay.metrics import RelayMetrics
from controller.relay.spec import new_instance


def _value(metrics: RelayMetrics, name: str, **labels: str) -> float | None:
    value: float | None = metrics.registry.get_sample_value(name, labels)
    return value


def test_a_fleet_pass_sets_and_resets_the_per_provider_gauges() -> None:
    metrics = RelayMetrics(CollectorRegistry())
    failed = new_instance(instance_id="aws-provisioning", provider="aws", region="r",
                          state="provisioning-failed")  # fmt: skip
    draining = new_instance(instance_id="o1", provider="oci", region="r", state="draining")
    metrics.record_fleet([failed, draining])
    assert _value(metrics, "llmsafespaces_relay_provisioning_failed", provider="aws") == 1
    assert _value(metrics, "llmsafespaces_relay_draining", provider="oci") == 1
    assert _value(metrics, "llmsafespaces_relay_draining", provider="aws") == 0
    metrics.record_fleet([new_instance(instance_id="i", provider="aws", region="r", healthy=True)])
    assert _value(metrics, "llmsafespaces_relay_provisioning_failed", provider="aws") == 0
    assert _value(metrics, "llmsafespaces_relay_draining", provider="oci") is None
    assert _value(metrics, "llmsafespaces_relay_healthy_replicas") == 1


def test_the_fleet_exposes_its_healthy_count_and_running_replacements() -> None:
    metrics = RelayMetrics(CollectorRegistry())
    old = new_instance(instance_id="i-1", provider="aws", region="r", state="unhealthy")
    spare = new_instance(instance_id="i-2", provider="aws", region="r", replaces="i-1")
    oci = new_instance(instance_id="o-1", provider="oci", region="r", healthy=True)
    metrics.record_fleet([old, spare, oci])
    assert _value(metrics, "llmsafespaces_relay_healthy_replicas") == 1
    assert _value(metrics, "llmsafespaces_relay_replacing", provider="aws") == 1
    assert _value(metrics, "llmsafespaces_relay_replacing", provider="oci") == 0
    metrics.record_fleet([oci])
    assert _value(metrics, "llmsafespaces_relay_replacing", provider="aws") is None


def test_counters_accumulate_per_label_set_and_the_histogram_records() -> None:
    metrics = RelayMetrics(CollectorRegistry())
    metrics.rotations.labels(provider="aws", reason="manual").inc()
    metrics.rotations.labels(provider="aws", reason="manual").inc()
    metrics.rotations.labels(provider="oci", reason="manual").inc()
    metrics.provision_duration.labels(provider="aws").observe(42)
    assert (
        _value(metrics, "llmsafespaces_relay_rotation_total", provider="aws", reason="manual") == 2
    )
    assert (
        _value(metrics, "llmsafespaces_relay_provision_duration_seconds_count", provider="aws") == 1
    )
    assert (
        _value(metrics, "llmsafespaces_relay_provision_duration_seconds_sum", provider="aws") == 42
    )


def test_every_metric_name_is_registered_once_with_the_llmsafespaces_relay_prefix() -> None:
    registry = CollectorRegistry()
    RelayMetrics(registry)
    names = {family.name for family in registry.collect()}
    assert names == {
        "llmsafespaces_relay_healthy_replicas",
        "llmsafespaces_relay_replacing",
        "llmsafespaces_relay_replacements",
        "llmsafespaces_relay_provisioning_failed",
        "llmsafespaces_relay_draining",
        "llmsafespaces_relay_quota_exhausted",
        "llmsafespaces_relay_provision_duration_seconds",
        "llmsafespaces_relay_rotation",
        "llmsafespaces_relay_orphans_destroyed",
        "llmsafespaces_relay_orphan_sweeps",
        "llmsafespaces_relay_unclaimed_vms",
    }
