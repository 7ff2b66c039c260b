"""What the TLS server asks of a certificate source, and the one place that picks the source
the settings ask for.

The server builds its listening socket once with ``ssl_context()``; a source swaps the
certificate that context serves (through its SNI callback, ``certs/tls.py``), so new
connections get a new certificate without a restart.
"""

from __future__ import annotations

import datetime
import socket
import ssl
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from wspin.core.errors import ConfigError

if TYPE_CHECKING:
    from certs.metrics import CertificateMetrics
    from certs.settings import CertificateSettings
    from wspin.kube.client import Kube

# The certificate machinery (cryptography, the leader elector) is imported by the function
# that builds a source, not here: the server's module imports this one at start.


class CertificateSource(Protocol):
    def ssl_context(self) -> ssl.SSLContext:
        """The server-side context; the same object for the life of the process."""
        ...

    async def run(self) -> None:
        """Keep the certificate current until cancelled (reload, renew)."""
        ...

    def healthy(self) -> bool:
        """A certificate is loaded and valid now (past notBefore, before notAfter)."""
        ...

    def problem(self) -> str | None:
        """What ``healthy()`` is False about, for the readiness reason; None when healthy."""
        ...

    def trust_problem(self) -> str | None:
        """Why the API server would refuse the served certificate (the webhook configurations
        do not carry its CA yet), or None; None too where the source cannot know (files,
        whose CA someone else publishes)."""
        ...

    def not_after(self) -> datetime.datetime | None:
        """Expiry of the certificate currently served."""
        ...


def certificate_source(
    settings: CertificateSettings, kube: Kube | None, namespace: str, metrics: CertificateMetrics
) -> CertificateSource:
    """The source ``settings`` ask for. File mode reads and checks the files here, so a
    broken certificate exits 1 at start; self-managed mode needs the API (``ConfigError``
    otherwise) and campaigns for its own Lease ``<secret>-authority``."""
    from certs.files import FileSource

    if not settings.self_managed:
        source = FileSource(Path(settings.cert_file), Path(settings.key_file), metrics=metrics)
        source.load_at_start()
        return source
    if kube is None:
        raise ConfigError(
            "--self-managed-certs needs access to the Kubernetes API (to keep the Secret and "
            "patch the caBundle), and none is configured",
            "run in a pod with a service account, pass --kubeconfig, or use "
            "--tls-cert-file/--tls-key-file instead",
        )
    from certs.authority import Policy
    from certs.build import service_dns_names
    from certs.cabundle import targets
    from certs.reports import ServingReports, reports_name
    from certs.selfmanaged import SelfManagedSettings, SelfManagedSource
    from certs.store import SecretStore
    from wspin.kube.leader import LeaderElector, LeaseSettings

    secret, service = settings.secret, settings.service_name
    webhooks = targets(settings.mutating_webhook_name, settings.validating_webhook_name)
    runtime = SelfManagedSettings(
        secret=secret,
        namespace=namespace,
        policy=Policy(dns_names=tuple(service_dns_names(service, namespace))),
        webhooks=tuple(webhooks),
        pod=settings.pod_name,
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
        SecretStore(kube, namespace, secret), runtime, elector, reports=reports, metrics=metrics
    )
