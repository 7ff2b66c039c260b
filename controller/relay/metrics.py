"""The relay controller's Prometheus metrics, prefix ``llmsafespaces_relay_``.

Held in one object registered on the registry the caller passes: the manager's (the
process's one registry) in production, a private one per test.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controller.relay.spec import Instance

PROVISION_BUCKETS = (5, 15, 30, 60, 120, 300, 600, 900, 1200)
"""Seconds; a VM takes from under a minute to ~20 minutes to run with a public IP."""


class RelayMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.healthy_replicas = Gauge(
            "llmsafespaces_relay_healthy_replicas",
            "Relay VMs the router reports healthy.",
            registry=registry,
        )
        self.replacing = Gauge(
            "llmsafespaces_relay_replacing",
            "1 while the provider's slot runs a replacement beside an unhealthy VM.",
            ["provider"],
            registry=registry,
        )
        self.replacements = Counter(
            "llmsafespaces_relay_replacements_total",
            "Replacements of unhealthy relay VMs started, by mode (surge: launched beside "
            "the unhealthy VM; in_place: the unhealthy VM destroyed first).",
            ["provider", "mode"],
            registry=registry,
        )
        self.provisioning_failed = Gauge(
            "llmsafespaces_relay_provisioning_failed",
            "1 when the provider's slot is in state provisioning-failed.",
            ["provider"],
            registry=registry,
        )
        self.draining = Gauge(
            "llmsafespaces_relay_draining",
            "1 when the provider's relay is draining.",
            ["provider"],
            registry=registry,
        )
        self.quota_exhausted = Gauge(
            "llmsafespaces_relay_quota_exhausted",
            "1 when the provider's relay has exhausted its quota.",
            ["provider"],
            registry=registry,
        )
        self.provision_duration = Histogram(
            "llmsafespaces_relay_provision_duration_seconds",
            "Seconds from the launch until the VM ran with a public IP.",
            ["provider"],
            buckets=PROVISION_BUCKETS,
            registry=registry,
        )
        self.rotations = Counter(
            "llmsafespaces_relay_rotation_total",
            "Relay VMs replaced, by reason (manual, unhealthy, gone).",
            ["provider", "reason"],
            registry=registry,
        )
        self.orphans_destroyed = Counter(
            "llmsafespaces_relay_orphans_destroyed_total",
            "Orphaned relay VMs by outcome (destroyed, dry_run, failed).",
            ["provider", "outcome"],
            registry=registry,
        )
        self.orphan_sweeps = Counter(
            "llmsafespaces_relay_orphan_sweeps_total",
            "Orphan sweeps by outcome (completed, skipped).",
            ["outcome"],
            registry=registry,
        )
        self.unclaimed = Gauge(
            "llmsafespaces_relay_unclaimed_vms",
            "Managed relay VMs without a cluster tag and without an owner in this cluster, "
            "as the last orphan sweep saw them (never destroyed automatically).",
            registry=registry,
        )

    def record_fleet(self, instances: Sequence[Instance]) -> None:
        """Reset the per-provider families, then set one value per instance. Each fleet's
        slots and healthy minimum are the per-relay gauges of ``fleet_metrics``, read from the
        cache at scrape time."""
        self.healthy_replicas.set(sum(1 for i in instances if i.get("healthy")))
        families = (
            (self.provisioning_failed, "provisioning-failed"),
            (self.draining, "draining"),
            (self.quota_exhausted, "quota-exhausted"),
        )
        for gauge, _ in families:
            gauge.clear()
        self.replacing.clear()
        replacing = {str(i.get("provider") or "") for i in instances if i.get("replaces")}
        for instance in instances:
            provider = str(instance.get("provider") or "")
            self.replacing.labels(provider=provider).set(1 if provider in replacing else 0)
            if instance.get("replaces"):
                continue  # the slot's state is its current VM's
            for gauge, state in families:
                gauge.labels(provider=provider).set(1 if instance.get("state") == state else 0)
