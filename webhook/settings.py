"""``WebhookSettings``: every flag of ``wspin webhook``, parsed and checked once at start.

The flags of the policies (validator caps, tenant quota, insecure registries) are declared
here too: the policy modules take the values these build and never see a flag or the
environment. ``POD_NAMESPACE`` (set by the chart) is read here, once.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from certs.settings import (
    CertificateSettings,
    add_certificate_flags,
    certificate_settings_from_args,
)
from webhook.reference import check_insecure_registries
from webhook.tenant_quota import QuotaLimits
from webhook.validate import ValidatorConfig
from wspin.core.delivery import (
    AgentdDelivery,
    OpencodeDelivery,
)
from wspin.core.errors import ConfigError
from wspin.core.flags import (
    add_delivery_flags,
    add_excluded_namespaces_flag,
    add_flag,
    add_kubeconfig_flag,
    add_runtime_classes_flag,
    add_workspace_writer_flags,
    deliveries_from_args,
)
from wspin.core.namespaces import (
    DEFAULT_NAMESPACE,
    excluded_namespaces_from,
    workspaces_namespace_from,
)
from wspin.core.owners import trusted_writers_from
from wspin.core.tenancy import runtime_classes_from
from wspin.http.limits import ConnectionLimits
from wspin.http.settings import add_connection_flags, connection_limits_from_args

DEFAULT_LIMITS = ConnectionLimits()
_REGISTRY_PREFIX_CHARS = re.compile(r"^[a-zA-Z0-9._/:@-]+$")


@dataclass(frozen=True)
class ServingSettings:
    host: str
    """Address the HTTPS admission server binds (default all interfaces, for the Service)."""
    port: int
    """HTTPS port for the API server's calls (default 8443: unprivileged, non-root)."""
    metrics_port: int
    """Plain-HTTP port for /metrics, /healthz and /readyz (default 9090; 0 disables)."""
    shutdown_delay: float
    """Seconds to keep answering after SIGTERM while /readyz reports the shutdown (default 5):
    endpoints take a moment to drop a terminating pod, and with ``failurePolicy: Fail`` a
    request sent to a closed port fails a pod creation."""
    limits: ConnectionLimits = DEFAULT_LIMITS
    """The deadlines and bounds of both ports (``wspin.http.limits``)."""


@dataclass(frozen=True)
class WebhookSettings:
    serving: ServingSettings
    certificates: CertificateSettings
    """Where the serving certificate comes from (files or the self-managed Secret)."""
    agentd: AgentdDelivery
    opencode: OpencodeDelivery
    validator: ValidatorConfig
    tenant_quota: QuotaLimits
    """Per-tenant workspace pod limits (``/validate-pod-tenant-quota``); all 0 disables it."""
    insecure_registries: frozenset[str]
    """Registries (HOST:PORT) read over plain HTTP; loopback registries always are."""
    skip_image_volume_probe: bool
    """Skip the dry-run probe for clusters where the webhook has no API access."""
    kubeconfig: str | None
    """Kubeconfig for API access; else $KUBECONFIG, else the in-cluster service account."""
    log_level: str
    namespace: str = DEFAULT_NAMESPACE
    """The webhook's own namespace (``POD_NAMESPACE``): its pins cache, Lease and Secret live
    there, and no Workspace may be created there."""
    in_cluster: bool = False
    """Running in a pod (``KUBERNETES_SERVICE_HOST`` is set): the service account gives API
    access without a kubeconfig."""


def add_serving_flags(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, "--host", default="0.0.0.0", help="address to bind")  # noqa: S104
    add_flag(parser, "--port", type=int, default=8443, help="HTTPS admission port")
    add_flag(
        parser,
        "--metrics-port",
        type=int,
        default=9090,
        help="plain-HTTP port for /metrics, /healthz, /readyz (0 disables)",
    )
    add_flag(
        parser,
        "--shutdown-delay",
        type=float,
        default=5.0,
        help="seconds to keep serving after SIGTERM, unready, before closing",
    )
    add_kubeconfig_flag(parser)
    add_flag(
        parser,
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log level",
    )


def add_pins_flags(parser: argparse.ArgumentParser) -> None:
    """``--insecure-registry`` (repeatable) and ``--skip-image-volume-probe``."""
    group = parser.add_argument_group("pins")
    add_insecure_registry_flag(group)
    add_flag(
        group,
        "--skip-image-volume-probe",
        default=False,
        help="do not dry-run a probe pod to check that the API server keeps image volumes "
        "(for clusters where the webhook has no API access)",
    )


def add_insecure_registry_flag(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
) -> None:
    """``--insecure-registry HOST:PORT``, repeatable; its env variable is comma separated."""
    add_flag(
        parser,
        "--insecure-registry",
        default=[],
        action="append",
        metavar="HOST:PORT",
        help="registry read over plain HTTP (repeatable; env: comma separated); "
        "loopback registries always are",
    )


def insecure_registries_from_args(args: argparse.Namespace) -> frozenset[str]:
    """The checked ``--insecure-registry`` entries; ConfigError for a URL or a path."""
    return check_insecure_registries(args.insecure_registry or ())


def add_validator_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The validator's flags (each also read from its WSPIN_* environment variable)."""
    add_flag(
        parser,
        "--max-workspace-storage-gi",
        type=int,
        default=1024,
        help="largest Workspace spec.storage.size in GiB; 0 disables the cap",
    )
    add_flag(
        parser,
        "--max-workspace-cpu-millicores",
        type=int,
        default=16000,
        help="largest Workspace cpu request or limit in millicores; 0 disables the cap",
    )
    add_flag(
        parser,
        "--max-workspace-memory-mi",
        type=int,
        default=65536,
        help="largest Workspace memory request or limit in MiB; 0 disables the cap",
    )
    add_flag(
        parser,
        "--allowed-runtime-registries",
        default="",
        help="comma-separated registry prefixes an image-shaped spec.runtime must start with "
        "(e.g. ghcr.io/acme/); empty allows only RuntimeEnvironment names",
    )
    add_flag(
        parser,
        "--allowed-storage-classes",
        default="",
        help="comma-separated StorageClass names a Workspace may use; empty allows any",
    )
    add_excluded_namespaces_flag(parser)
    add_runtime_classes_flag(parser)
    add_workspace_writer_flags(parser)
    add_flag(
        parser,
        "--max-workspaces-per-member",
        type=int,
        default=0,
        help="Workspaces one member (the user a trusted writer named as a Workspace's owner) "
        "may own, checked on Workspace CREATE; 0 disables the limit",
    )


def _check_cap(flag: str, value: object, fix: str) -> None:
    """A cap or limit flag: a whole number, 0 to disable it; ConfigError naming ``flag``."""
    if not isinstance(value, int) or value < 0:
        raise ConfigError(f"{flag} must be a whole number >= 0 (got {value!r})", fix)


def _comma_list(value: str | None) -> tuple[str, ...]:
    return tuple(item.strip() for item in (value or "").split(",") if item.strip())


def normalize_registry_prefix(prefix: str) -> str:
    """``ghcr.io/acme`` → ``ghcr.io/acme/``: without the slash ``ghcr.io/acme.evil.com/x`` would
    match."""
    return prefix if prefix.endswith("/") else prefix + "/"


def validator_config_from_args(args: argparse.Namespace, own_namespace: str) -> ValidatorConfig:
    """Build the config from parsed flags (``own_namespace`` is always excluded); a negative
    cap raises ConfigError naming the flag."""
    for flag, value in (
        ("--max-workspace-storage-gi", args.max_workspace_storage_gi),
        ("--max-workspace-cpu-millicores", args.max_workspace_cpu_millicores),
        ("--max-workspace-memory-mi", args.max_workspace_memory_mi),
    ):
        _check_cap(flag, value, f"set {flag} to a positive cap, or 0 to disable it")
    _check_cap(
        "--max-workspaces-per-member",
        args.max_workspaces_per_member,
        "set --max-workspaces-per-member / webhook.tenantQuota.maxWorkspacesPerMember to a "
        "limit, or 0 to disable it",
    )
    registries = _comma_list(args.allowed_runtime_registries)
    for prefix in registries:
        if not _REGISTRY_PREFIX_CHARS.match(prefix) or ".." in prefix:
            raise ConfigError(
                f"--allowed-runtime-registries entry {prefix!r} is not a registry prefix",
                "set --allowed-runtime-registries to prefixes like 'ghcr.io/acme/'",
            )
    workspaces_namespace = workspaces_namespace_from(args.workspaces_namespace)
    return ValidatorConfig(
        max_storage_gi=args.max_workspace_storage_gi,
        max_cpu_millicores=args.max_workspace_cpu_millicores,
        max_memory_mi=args.max_workspace_memory_mi,
        allowed_runtime_registries=tuple(normalize_registry_prefix(p) for p in registries),
        allowed_storage_classes=_comma_list(args.allowed_storage_classes),
        excluded_namespaces=excluded_namespaces_from(
            args.excluded_namespaces, own_namespace, workspaces_namespace
        ),
        allowed_runtime_classes=runtime_classes_from(args.allowed_runtime_classes),
        trusted_writers=trusted_writers_from(args.trusted_workspace_writers),
        workspaces_namespace=workspaces_namespace,
        max_workspaces_per_member=args.max_workspaces_per_member,
    )


_LIMIT_FLAGS: Final = (
    ("--max-workspaces-per-tenant", "max_workspaces_per_tenant", "maxWorkspacesPerTenant"),
    ("--max-cpu-millis-per-tenant", "max_cpu_millis_per_tenant", "maxCpuMillisPerTenant"),
    ("--max-memory-mi-per-tenant", "max_memory_mi_per_tenant", "maxMemoryMiPerTenant"),
    (
        "--max-active-workspaces-per-member",
        "max_active_workspaces_per_member",
        "maxActiveWorkspacesPerMember",
    ),
)


def add_tenant_quota_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The quota's flags (each also read from its WSPIN_* environment variable)."""
    add_flag(
        parser,
        "--max-workspaces-per-tenant",
        type=int,
        default=0,
        help="workspace pods one tenant (a namespace's llmsafespaces.dev/tenant label, else the "
        "namespace) may run; 0 disables the limit",
    )
    add_flag(
        parser,
        "--max-cpu-millis-per-tenant",
        type=int,
        default=0,
        help="summed CPU requests (millicores) of one tenant's workspace pods; "
        "0 disables the limit",
    )
    add_flag(
        parser,
        "--max-memory-mi-per-tenant",
        type=int,
        default=0,
        help="summed memory requests (MiB) of one tenant's workspace pods; 0 disables the limit",
    )
    add_flag(
        parser,
        "--max-active-workspaces-per-member",
        type=int,
        default=0,
        help="workspace pods one member (the user a trusted writer named as a Workspace's "
        "owner) may run; 0 disables the limit",
    )
    add_flag(
        parser,
        "--tenant-quota-when-unknown",
        default="deny",
        choices=["deny", "allow"],
        help="answer while the pod cache has not synced: deny (keep the quota) or allow",
    )


def tenant_quota_from_args(args: argparse.Namespace) -> QuotaLimits:
    """The limits from parsed flags; a negative limit raises ConfigError naming the flag."""
    for flag, attribute, value_name in _LIMIT_FLAGS:
        fix = f"set {flag} / webhook.tenantQuota.{value_name} to a limit, or 0 to disable it"
        _check_cap(flag, getattr(args, attribute), fix)
    return QuotaLimits(
        max_workspaces=args.max_workspaces_per_tenant,
        max_cpu_millis=args.max_cpu_millis_per_tenant,
        max_memory_mi=args.max_memory_mi_per_tenant,
        max_active_per_member=args.max_active_workspaces_per_member,
        when_unknown=args.tenant_quota_when_unknown,
    )


# -- the whole process ------------------------------------------------------------------------


def add_webhook_flags(parser: argparse.ArgumentParser) -> None:
    add_serving_flags(parser)
    add_connection_flags(parser)
    add_delivery_flags(parser)
    add_pins_flags(parser)
    add_validator_flags(parser)
    add_tenant_quota_flags(parser)
    add_certificate_flags(parser)


def settings_from_args(
    args: argparse.Namespace, environ: Mapping[str, str] = os.environ
) -> WebhookSettings:
    """Validate every flag; raise ConfigError naming the flag and Helm value on the first error."""
    for flag, port in (("--port", args.port), ("--metrics-port", args.metrics_port)):
        if not 0 <= port <= 65535:
            raise ConfigError(
                f"{flag} must be a TCP port (0-65535), got {port}",
                f"set {flag} / webhook.{flag.strip('-').replace('-p', 'P')}",
            )
    if not 0 <= args.shutdown_delay <= 300:
        raise ConfigError(
            f"--shutdown-delay must be between 0 and 300 seconds, got {args.shutdown_delay}",
            "set --shutdown-delay to a number of seconds (5 fits most clusters)",
        )
    agentd, opencode = deliveries_from_args(args)
    namespace = environ.get("POD_NAMESPACE") or DEFAULT_NAMESPACE
    return WebhookSettings(
        serving=ServingSettings(
            args.host,
            args.port,
            args.metrics_port,
            args.shutdown_delay,
            connection_limits_from_args(args),
        ),
        certificates=certificate_settings_from_args(args),
        agentd=agentd,
        opencode=opencode,
        validator=validator_config_from_args(args, namespace),
        tenant_quota=tenant_quota_from_args(args),
        insecure_registries=insecure_registries_from_args(args),
        skip_image_volume_probe=bool(args.skip_image_volume_probe),
        kubeconfig=args.kubeconfig,
        log_level=args.log_level,
        namespace=namespace,
        in_cluster=bool(environ.get("KUBERNETES_SERVICE_HOST")),
    )
