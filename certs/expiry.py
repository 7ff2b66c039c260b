"""Certificate expiry, made visible: a Prometheus gauge and warnings at 30 and 7 days.

Renewal normally happens long before either warning; a warning means renewal is stuck
(files not rotated by whoever supplies them, or no replica holds the Lease).
"""

from __future__ import annotations

import datetime
import logging

from cryptography import x509
from prometheus_client import Gauge

from certs.build import fingerprint
from wspin.core.logs import fields

log = logging.getLogger("wspin.certs")

WARN_BEFORE = (datetime.timedelta(days=30), datetime.timedelta(days=7))
"""Log a warning once when less than each of these is left (largest first)."""


def warning_due(not_after: datetime.datetime, now: datetime.datetime) -> datetime.timedelta | None:
    """The tightest threshold the remaining lifetime is under, or None with time to spare."""
    left = not_after - now
    due = None
    for threshold in WARN_BEFORE:
        if left <= threshold:
            due = threshold
    return due


class ExpiryReporter:
    """Updates the gauge on every observation and warns once per certificate and threshold
    (and logs an error once when it has expired)."""

    def __init__(self, gauge: Gauge) -> None:
        self._gauge = gauge
        """``wspin_webhook_certificate_expiry_timestamp_seconds`` (``CertificateMetrics``)."""
        self._warned: set[tuple[str, datetime.timedelta]] = set()

    def observe(self, label: str, cert: x509.Certificate, now: datetime.datetime) -> None:
        not_after = cert.not_valid_after_utc
        self._gauge.labels(certificate=label).set(not_after.timestamp())
        due = warning_due(not_after, now)
        if due is None:
            return
        left = not_after - now
        expired = left <= datetime.timedelta(0)
        stage = datetime.timedelta(0) if expired else due
        key = (fingerprint(cert), stage)
        if key in self._warned:
            return
        self._warned.add(key)
        log.log(
            logging.ERROR if expired else logging.WARNING,
            "certificate expired" if expired else "certificate expires soon",
            extra=fields(
                certificate=label,
                fingerprint=fingerprint(cert),
                notAfter=not_after.isoformat(),
                daysLeft=round(left / datetime.timedelta(days=1), 1),
                thresholdDays=stage.days,
            ),
        )
