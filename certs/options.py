"""The webhook's certificate flags and the one place that turns them into a source.

Two modes, chosen by flags and checked once at start:

- files (``--tls-cert-file``/``--tls-key-file``): certificates supplied by the user or by
  cert-manager through a mounted Secret, reloaded when the files change;
- self-managed (``--self-managed-certs --secret NAME``): the replicas keep a CA and serving
  certificate in that Secret, one of them (the Lease holder) renewing and rotating it and
  patching the caBundle of the named webhook configurations.
"""

from __future__ import annotations

import argparse
import re
import socket
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from wspin.core.errors import ConfigError
from wspin.core.flags import add_flag

if TYPE_CHECKING:
    from certs.selfmanaged import SelfManagedSource
    from certs.source import CertificateSource
    from wspin.kube.client import Kube

# The certificate machinery (cryptography, the leader elector) is imported by the functions
# that build a source, not here: `wspin webhook --help` only needs the flags.

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

MODE_FIX = (
    "set --tls-cert-file and --tls-key-file (Helm: certificates.mode certManager or provided), "
    "or --self-managed-certs with --secret (Helm: certificates.mode selfManaged)"
)


def add_certificate_flags(parser: argparse.ArgumentParser) -> None:
    """The serving-certificate flags of ``wspin webhook`` (each also read from WSPIN_…)."""
    group = parser.add_argument_group("certificates")
    add_flag(
        group,
        "--tls-cert-file",
        default=None,
        help="PEM serving certificate (and chain); re-read when it changes",
    )
    add_flag(
        group,
        "--tls-key-file",
        default=None,
        help="PEM private key of --tls-cert-file (unencrypted); re-read when it changes",
    )
    add_flag(
        group,
        "--self-managed-certs",
        default=False,
        help="generate, renew and rotate the CA and serving certificate in --secret",
    )
    add_flag(
        group,
        "--secret",
        default=None,
        help="Secret (in the own namespace) holding the self-managed CA and certificate",
    )
    add_flag(
        group,
        "--service-name",
        default=None,
        help="the webhook's Service: the serving certificate's DNS names derive from it",
    )
    add_flag(
        group,
        "--pod-name",
        env="POD_NAME",
        default=None,
        help="this replica's pod name (default: the hostname): self-managed mode reports the "
        "certificate it serves under it, and finds it in the Service's EndpointSlices",
    )
    add_flag(
        group,
        "--mutating-webhook-name",
        default=None,
        help="MutatingWebhookConfiguration whose caBundle self-managed mode keeps current",
    )
    add_flag(
        group,
        "--validating-webhook-name",
        default=None,
        help="ValidatingWebhookConfiguration whose caBundle self-managed mode keeps current",
    )


def certificate_source_from_args(
    args: argparse.Namespace, kube: Kube | None, namespace: str
) -> CertificateSource:
    """The source the flags ask for; ``ConfigError`` naming the flag for a bad combination.

    File mode reads and checks the files here, so a broken certificate exits 1 at start.
    """
    from certs.files import FileSource

    cert_file: str | None = args.tls_cert_file or None
    key_file: str | None = args.tls_key_file or None
    if args.self_managed_certs:
        if cert_file or key_file:
            raise ConfigError(
                "--self-managed-certs and --tls-cert-file/--tls-key-file both given; "
                "choose one way to get the serving certificate",
                MODE_FIX,
            )
        return self_managed_source(args, kube, namespace)
    if not cert_file and not key_file:
        raise ConfigError("no serving certificate configured", MODE_FIX)
    if not cert_file or not key_file:
        missing = "--tls-key-file" if cert_file else "--tls-cert-file"
        given = "--tls-cert-file" if cert_file else "--tls-key-file"
        raise ConfigError(f"{given} is set but {missing} is not", f"set {missing} as well")
    source = FileSource(Path(cert_file), Path(key_file))
    source.load_at_start()
    return source


def self_managed_source(
    args: argparse.Namespace, kube: Kube | None, namespace: str
) -> SelfManagedSource:
    """The Secret-backed source with its own Lease ``<secret>-authority``."""
    from certs.authority import Policy
    from certs.build import service_dns_names
    from certs.cabundle import targets
    from certs.reports import ServingReports, reports_name
    from certs.selfmanaged import SelfManagedSettings, SelfManagedSource
    from certs.store import SecretStore
    from wspin.kube.leader import LeaderElector, LeaseSettings

    if kube is None:
        raise ConfigError(
            "--self-managed-certs needs access to the Kubernetes API (to keep the Secret and "
            "patch the caBundle), and none is configured",
            "run in a pod with a service account, pass --kubeconfig, or use "
            "--tls-cert-file/--tls-key-file instead",
        )
    secret = _required(args.secret, "--secret", "certificates.secretName")
    service = _required(args.service_name, "--service-name", "the chart's webhook Service name")
    if not _DNS_SUBDOMAIN.match(secret) or len(secret) > 253:
        raise ConfigError(
            f"--secret {secret!r} is not a valid Secret name",
            "use lowercase letters, digits, '-' and '.' (Helm: certificates.secretName)",
        )
    if not _DNS_LABEL.match(service):
        raise ConfigError(
            f"--service-name {service!r} is not a valid Service name",
            "use at most 63 lowercase letters, digits and '-', starting with a letter",
        )
    webhooks = targets(args.mutating_webhook_name, args.validating_webhook_name)
    if not webhooks:
        raise ConfigError(
            "--self-managed-certs needs a webhook configuration to publish its CA in",
            "set --mutating-webhook-name and/or --validating-webhook-name",
        )
    pod = args.pod_name or socket.gethostname()  # a pod's hostname is its name
    if not _DNS_SUBDOMAIN.match(pod) or len(pod) > 253:
        raise ConfigError(
            f"--pod-name {pod!r} is not a valid pod name",
            "set --pod-name (the chart sets POD_NAME from metadata.name)",
        )
    settings = SelfManagedSettings(
        secret=secret,
        namespace=namespace,
        policy=Policy(dns_names=tuple(service_dns_names(service, namespace))),
        webhooks=tuple(webhooks),
        pod=pod,
    )
    elector = LeaderElector(
        kube,
        LeaseSettings(
            namespace=namespace,
            name=f"{secret}-authority",
            # client-go's convention: the pod name (hostname) plus a suffix unique per process.
            identity=f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}",
        ),
    )
    reports = ServingReports(kube, namespace, reports_name(secret), service)
    return SelfManagedSource(
        SecretStore(kube, namespace, secret), settings, elector, reports=reports
    )


def _required(value: str | None, flag: str, helm: str) -> str:
    if not value:
        raise ConfigError(f"--self-managed-certs needs {flag}", f"set {flag} (Helm: {helm})")
    return value
