"""The webhook's certificate flags and the source they pick: every invalid combination names
the flag that fixes it."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from certs.build import issue_serving, new_ca, service_dns_names
from certs.files import FileSource, write_certificates
from certs.metrics import CertificateMetrics
from certs.selfmanaged import SelfManagedSource
from certs.settings import add_certificate_flags, certificate_settings_from_args
from certs.source import CertificateSource, certificate_source
from tests.certs.conftest import NAMESPACE, NOW, SERVICE, Webhooks
from wspin.core.errors import ConfigError
from wspin.core.flags import Parser
from wspin.core.kinds import LEASES
from wspin.kube.client import Kube


def parse(*argv: str) -> argparse.Namespace:
    parser = Parser()
    add_certificate_flags(parser)
    return parser.parse_args(argv)


def source_for(args: argparse.Namespace, kube: Kube | None, namespace: str) -> CertificateSource:
    """What the webhook does at start: settings from the flags, then the source."""
    settings = certificate_settings_from_args(args)
    return certificate_source(settings, kube, namespace, CertificateMetrics(CollectorRegistry()))


SELF_MANAGED = (
    "--self-managed-certs",
    "--secret=wspin-webhook-tls",
    "--service-name=wspin-webhook",
    "--mutating-webhook-name=m",
    "--validating-webhook-name=v",
)


@pytest.mark.parametrize(
    ("argv", "with_api", "message", "fix"),
    [
        ((), True, "no serving certificate configured", "--self-managed-certs with --secret"),
        (
            ("--tls-cert-file=c",),
            True,
            "--tls-cert-file is set but --tls-key-file",
            "--tls-key-file",
        ),
        (
            ("--tls-key-file=k",),
            True,
            "--tls-key-file is set but --tls-cert-file",
            "--tls-cert-file",
        ),
        ((*SELF_MANAGED, "--tls-cert-file=c"), True, "both given", "--tls-key-file"),
        (SELF_MANAGED, False, "needs access to the Kubernetes API", "--kubeconfig"),
        (SELF_MANAGED[:1] + SELF_MANAGED[2:], True, "needs --secret", "certificates.secretName"),
        (SELF_MANAGED[:2] + SELF_MANAGED[3:], True, "needs --service-name", "--service-name"),
        ((*SELF_MANAGED, "--secret=Bad_Name"), True, "'Bad_Name' is not a valid Secret", "Helm"),
        ((*SELF_MANAGED, "--service-name=9hook"), True, "'9hook' is not a valid Service", "letter"),
        (SELF_MANAGED[:3], True, "needs a webhook configuration", "--mutating-webhook-name"),
    ],
)
def test_invalid_combinations_are_config_errors_naming_the_flag(
    argv: tuple[str, ...], with_api: bool, message: str, fix: str, kube_api: object
) -> None:
    kube = Kube(kube_api) if with_api else None  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as caught:
        source_for(parse(*argv), kube, "ns")
    assert message in caught.value.message
    assert fix in caught.value.fix


def test_flags_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WSPIN_SELF_MANAGED_CERTS", "true")
    monkeypatch.setenv("WSPIN_SECRET", "from-env")
    monkeypatch.setenv("WSPIN_TLS_CERT_FILE", "/certs/tls.crt")
    args = parse()
    assert args.self_managed_certs is True
    assert args.secret == "from-env"
    assert args.tls_cert_file == "/certs/tls.crt"
    assert parse("--self-managed-certs=false").self_managed_certs is False


def test_file_mode_reads_the_files_at_start(tmp_path: Path) -> None:
    ca = new_ca(NOW)
    leaf = issue_serving(ca, service_dns_names(SERVICE, NAMESPACE), NOW)
    write_certificates(tmp_path, ca, leaf)
    source = source_for(
        parse(f"--tls-cert-file={tmp_path / 'tls.crt'}", f"--tls-key-file={tmp_path / 'tls.key'}"),
        None,
        "ns",
    )
    assert isinstance(source, FileSource)
    assert source.not_after() == leaf.not_after


async def test_self_managed_mode_campaigns_for_its_own_lease_and_serves(
    kube: Kube, namespace: str, webhooks: Webhooks
) -> None:
    args = parse(
        "--self-managed-certs",
        "--secret=wspin-webhook-tls",
        "--service-name=wspin-webhook",
        f"--mutating-webhook-name={webhooks.mutating}",
        f"--validating-webhook-name={webhooks.validating}",
    )
    source = source_for(args, kube, namespace)
    assert isinstance(source, SelfManagedSource)
    task = asyncio.create_task(source.run())
    try:
        async with asyncio.timeout(10):
            while not source.healthy():
                await asyncio.sleep(0.05)
        lease = await kube.get(LEASES, "wspin-webhook-tls-authority", namespace)
        assert lease["spec"]["holderIdentity"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    released = await kube.get(LEASES, "wspin-webhook-tls-authority", namespace)
    assert not released["spec"].get("holderIdentity")  # handed over on shutdown
