"""Expiry visibility: the Prometheus gauge and the 30- and 7-day warnings."""

from __future__ import annotations

import datetime
import logging

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from certs.build import issue_serving, new_ca
from certs.expiry import ExpiryReporter, warning_due
from certs.metrics import CertificateMetrics
from tests.certs.conftest import NOW

DAY = datetime.timedelta(days=1)


def reporter_on(registry: CollectorRegistry) -> ExpiryReporter:
    return ExpiryReporter(CertificateMetrics(registry).expiry)


def _exposed(registry: CollectorRegistry, label: str) -> float:
    """The gauge's value as a Prometheus scrape would read it."""
    text = generate_latest(registry).decode()
    for family in text_string_to_metric_families(text):
        if family.name == "wspin_webhook_certificate_expiry_timestamp_seconds":
            for sample in family.samples:
                if sample.labels == {"certificate": label}:
                    return sample.value
    raise AssertionError(f"no expiry sample for {label!r}")


@pytest.mark.parametrize(
    ("left", "due"),
    [
        (31 * DAY, None),
        (30 * DAY + datetime.timedelta(seconds=1), None),
        (30 * DAY, 30 * DAY),
        (8 * DAY, 30 * DAY),
        (7 * DAY, 7 * DAY),
        (datetime.timedelta(0), 7 * DAY),
        (-DAY, 7 * DAY),
    ],
)
def test_warning_is_due_under_thirty_and_under_seven_days(
    left: datetime.timedelta, due: datetime.timedelta | None
) -> None:
    assert warning_due(NOW + left, NOW) == due


def test_the_gauge_exposes_the_expiry_as_unix_time() -> None:
    leaf = issue_serving(new_ca(NOW), ["hook"], NOW)
    registry = CollectorRegistry()
    reporter_on(registry).observe("serving", leaf.cert, NOW)
    assert _exposed(registry, "serving") == (NOW + 365 * DAY).timestamp()


def test_each_threshold_warns_once_per_certificate(caplog: pytest.LogCaptureFixture) -> None:
    leaf = issue_serving(new_ca(NOW), ["hook"], NOW, lifetime=40 * DAY)
    reporter = reporter_on(CollectorRegistry())
    caplog.set_level(logging.INFO, logger="wspin.certs")
    for days in (0, 5, 10, 11, 20, 33, 34, 41):
        reporter.observe("serving", leaf.cert, NOW + days * DAY)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "certificate expires soon",
        "certificate expires soon",
        "certificate expired",
    ]
    assert [r.fields["thresholdDays"] for r in warnings] == [30, 7, 0]  # type: ignore[attr-defined]


def test_a_renewed_certificate_warns_again_when_it_ages(caplog: pytest.LogCaptureFixture) -> None:
    ca = new_ca(NOW)
    reporter = reporter_on(CollectorRegistry())
    caplog.set_level(logging.WARNING, logger="wspin.certs")
    for _ in range(2):
        leaf = issue_serving(ca, ["hook"], NOW, lifetime=20 * DAY)
        reporter.observe("serving", leaf.cert, NOW)
    assert len(caplog.records) == 2
