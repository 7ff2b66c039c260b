"""The certificate sources' Prometheus metrics, on the registry of the process serving them.

One ``CertificateMetrics`` per process, built from the process's registry and handed to the
source it serves from (see ``webhook``'s package docstring for the pattern).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class CertificateMetrics:
    """Expiry, refused reloads, and the state of a CA rotation."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.expiry = Gauge(
            "wspin_webhook_certificate_expiry_timestamp_seconds",
            "Unix time at which the certificate expires, by certificate (serving or ca).",
            ["certificate"],
            registry=registry,
        )
        self.rejected = Counter(
            "wspin_webhook_certificate_reload_rejected_total",
            "Certificate pairs a reload refused to serve (the previous pair kept serving), each "
            "counted once however long it stays in place, by reason: expired, not-yet-valid, "
            "key-mismatch, unreadable.",
            ["reason"],
            registry=registry,
        )
        self.rotation_held = Gauge(
            "wspin_webhook_ca_rotation_held",
            "1 while the Lease holder keeps the old CA in the caBundle because replicas taking "
            "traffic have not reported serving the new certificate in time; else 0.",
            registry=registry,
        )
        self.rotation_lagging = Gauge(
            "wspin_webhook_ca_rotation_lagging_replicas",
            "Replicas taking traffic that have not reported serving the new certificate in "
            "time (on the Lease holder, during a CA rotation).",
            registry=registry,
        )
