"""``WebhookSettings``: every flag of ``wspin webhook``, parsed and checked once at start."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from webhook.pins import add_pins_flags, insecure_registries_from_args
from webhook.tenant_quota import QuotaLimits, add_tenant_quota_flags, tenant_quota_from_args
from webhook.validate import ValidatorConfig, add_validator_flags, validator_config_from_args
from wspin.core.delivery import (
    AgentdDelivery,
    OpencodeDelivery,
    add_delivery_flags,
    deliveries_from_args,
)
from wspin.core.errors import ConfigError
from wspin.core.flags import add_flag
from wspin.http.flags import add_connection_flags, connection_limits_from_args
from wspin.http.limits import ConnectionLimits

DEFAULT_LIMITS = ConnectionLimits()


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
    add_flag(
        parser,
        "--kubeconfig",
        env="KUBECONFIG",
        default=None,
        help="kubeconfig file (default: in-cluster config)",
    )
    add_flag(
        parser,
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log level",
    )


def add_webhook_flags(parser: argparse.ArgumentParser) -> None:
    add_serving_flags(parser)
    add_connection_flags(parser)
    add_delivery_flags(parser)
    add_pins_flags(parser)
    add_validator_flags(parser)
    add_tenant_quota_flags(parser)


def settings_from_args(args: argparse.Namespace) -> WebhookSettings:
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
    return WebhookSettings(
        serving=ServingSettings(
            args.host,
            args.port,
            args.metrics_port,
            args.shutdown_delay,
            connection_limits_from_args(args),
        ),
        agentd=agentd,
        opencode=opencode,
        validator=validator_config_from_args(args),
        tenant_quota=tenant_quota_from_args(args),
        insecure_registries=insecure_registries_from_args(args),
        skip_image_volume_probe=bool(args.skip_image_volume_probe),
        kubeconfig=args.kubeconfig,
        log_level=args.log_level,
    )
