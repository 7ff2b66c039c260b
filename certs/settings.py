"""The webhook's certificate flags, parsed once into ``CertificateSettings``.

Two modes, chosen by flags and checked here at start (each error names the flag and the Helm
value that fix it):

- files (``--tls-cert-file``/``--tls-key-file``): certificates supplied by the user or by
  cert-manager through a mounted Secret, reloaded when the files change;
- self-managed (``--self-managed-certs --secret NAME``): the replicas keep a CA and serving
  certificate in that Secret, one of them (the Lease holder) renewing and rotating it and
  patching the caBundle of the named webhook configurations.

``certs.source.certificate_source`` turns the settings into the source the server asks.
"""

from __future__ import annotations

import argparse
import re
import socket
from dataclasses import dataclass

from wspin.core.errors import ConfigError
from wspin.core.flags import add_flag

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

MODE_FIX = (
    "set --tls-cert-file and --tls-key-file (Helm: certificates.mode certManager or provided), "
    "or --self-managed-certs with --secret (Helm: certificates.mode selfManaged)"
)


@dataclass(frozen=True)
class CertificateSettings:
    """Where the serving certificate comes from."""

    cert_file: str = ""
    """``--tls-cert-file``: PEM serving certificate (and chain), re-read when it changes;
    "" in self-managed mode."""
    key_file: str = ""
    """``--tls-key-file``: its unencrypted PEM key."""
    self_managed: bool = False
    """``--self-managed-certs``: keep the CA and serving certificate in ``secret``."""
    secret: str = ""
    """``--secret``: the Secret (in the webhook's namespace) of self-managed mode."""
    service_name: str = ""
    """``--service-name``: the webhook's Service; the certificate's DNS names derive from it."""
    pod_name: str = ""
    """``--pod-name`` (``POD_NAME``, default the hostname): this replica, as self-managed mode
    reports what it serves and finds it in the Service's EndpointSlices."""
    mutating_webhook_name: str = ""
    """``--mutating-webhook-name``: the configuration whose caBundle self-managed mode keeps."""
    validating_webhook_name: str = ""
    """``--validating-webhook-name``: likewise, for the Workspace validator."""


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


def certificate_settings_from_args(args: argparse.Namespace) -> CertificateSettings:
    """The checked certificate settings; ``ConfigError`` naming the flag for a bad combination
    or name. (Whether the API can be reached is the source's question, asked when it is built.)
    """
    cert_file: str = args.tls_cert_file or ""
    key_file: str = args.tls_key_file or ""
    if not args.self_managed_certs:
        if not cert_file and not key_file:
            raise ConfigError("no serving certificate configured", MODE_FIX)
        if not cert_file or not key_file:
            missing = "--tls-key-file" if cert_file else "--tls-cert-file"
            given = "--tls-cert-file" if cert_file else "--tls-key-file"
            raise ConfigError(f"{given} is set but {missing} is not", f"set {missing} as well")
        return CertificateSettings(cert_file=cert_file, key_file=key_file)
    if cert_file or key_file:
        raise ConfigError(
            "--self-managed-certs and --tls-cert-file/--tls-key-file both given; "
            "choose one way to get the serving certificate",
            MODE_FIX,
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
    if not (args.mutating_webhook_name or args.validating_webhook_name):
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
    return CertificateSettings(
        self_managed=True,
        secret=secret,
        service_name=service,
        pod_name=pod,
        mutating_webhook_name=args.mutating_webhook_name or "",
        validating_webhook_name=args.validating_webhook_name or "",
    )


def _required(value: str | None, flag: str, helm: str) -> str:
    if not value:
        raise ConfigError(f"--self-managed-certs needs {flag}", f"set {flag} (Helm: {helm})")
    return value
