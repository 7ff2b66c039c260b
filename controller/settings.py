"""``ControllerSettings``: everything the controller process is configured with, as one frozen
tree built once at start from flags and their ``WSPIN_*`` environment variables.

``add_controller_flags`` declares the flags (the chart renders exactly these) and
``settings_from_args`` turns the parsed values into settings, raising ``ConfigError`` naming the
flag for anything malformed (the process then exits 1). Range checks that belong to relay
staging arming (the token TTL) are deliberately left to arming, whose failures exit 85.

Nothing reads ``os.environ`` after this; tests vary settings with ``dataclasses.replace``.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from controller.agentd_uploads import UploadStagingConfig, parse_upload_staging
from controller.durations import format_duration, parse_duration
from controller.egress_settings import (
    DEFAULT_ALLOWED_PORTS,
    EgressSettings,
    egress_settings_from,
)
from wspin.core.delivery import (
    AgentdDelivery,
    ArtifactDelivery,
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
    env_name,
    parse_bool,
)
from wspin.core.namespaces import (
    ALWAYS_EXCLUDED,
    DEFAULT_NAMESPACE,
    excluded_namespaces_from,
    workspaces_namespace_from,
)
from wspin.core.owners import (
    NO_TRUSTED_WRITERS,
    UPGRADE_FLAG,
    UPGRADE_MODES,
    TrustedWriters,
    UpgradeMode,
    trusted_writers_from,
    upgrade_mode_from,
)
from wspin.core.tenancy import runtime_classes_from
from wspin.kube.leader import LeaseSettings

log = logging.getLogger("controller")

LEASE_TIMING_ENV = {
    "lease_duration": "WSPIN_LEASE_DURATION",
    "renew_deadline": "WSPIN_RENEW_DEADLINE",
    "retry_period": "WSPIN_RETRY_PERIOD",
}
"""Environment-only overrides of the leader election timings (Go durations). Not flags: the
defaults are right for every deployment; tests shorten them to see a takeover in seconds."""

INTERNAL_TOKEN_ENV = "LLMSAFESPACES_INTERNAL_TOKEN"  # noqa: S105 - a variable name
"""The shared secret sent as ``X-Internal-Token`` to the API; environment only, never a flag."""

DEFAULT_LLM_RELAY_ROUTER_URL = "http://llm-relay-router.llm-relay.svc.cluster.local"
LOG_LEVELS = ("debug", "info", "warning", "error")
_REGION_PART = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
"""A provider or region name as the clouds spell them (``aws``, ``us-east-1``)."""
RELAY_CLOUDS = ("", "fake")

_D = TypeVar("_D", bound=ArtifactDelivery)
MAX_CONCURRENT_RECONCILES = (1, 64)
MIN_TERMINATION_GRACE = 36
"""Seconds: agentd's shutdown (HTTP drain, background work, children) takes 35 s; less cuts
sessions off mid-write."""
TERMINATION_GRACE_FLAG = "--workspace-termination-grace-seconds"
TtlAction = Literal["terminate", "delete"]
TTL_ACTIONS: tuple[TtlAction, ...] = ("terminate", "delete")
TERMINATION_GRACE_ALIAS = "--workspace-termination-grace"
"""The flag's former name, still accepted (the new name wins when both are given)."""


@dataclass(frozen=True)
class LeaderElectionSettings(LeaseSettings):
    """The Lease that makes one replica the reconciling one; the elector reads this value.
    ``namespace`` is the controller's own (``POD_NAMESPACE``)."""

    enabled: bool = False
    """``--enable-leader-election``. Off: this process always leads (a single replica)."""


@dataclass(frozen=True)
class RuntimeSettings:
    """How the process runs: ports, concurrency, leader election, shutdown. The manager reads
    this value directly (``Manager(kube, settings.runtime)``)."""

    health_port: int = 8081
    """``--health-port``: ``/healthz`` and ``/readyz`` (0 = any free port, for tests)."""
    metrics_port: int = 8080
    """``--metrics-port``: Prometheus ``/metrics`` (0 = any free port, for tests)."""
    bind_host: str | None = None
    """Address both side servers bind; None = every interface (in a pod). A port of 0 on the
    command line binds loopback: "any free port" only makes sense for a local test, and on
    every interface IPv4 and IPv6 would get different free ports."""
    max_concurrent_reconciles: int = 16
    """``--max-concurrent-reconciles``: workers per controller (each controller gets this many
    queue workers while leading), clamped to 1..64. A reconcile
    waits on the API server, not the CPU, so workers are sized for I/O. 1,000 Workspaces to
    pods against the in-repo API server answering in 15 ms (bench/workspaces.py), as a ratio
    to creating their pods, PVCs and service accounts directly: 3.05 with 4 workers, 1.74
    with 8, 1.40 with 16, 1.73 with 32, 1.97 with 64 (more only contend for one core)."""
    graceful_shutdown_timeout: float = 30.0
    """Seconds in-flight reconciles get to finish after SIGTERM (Kubernetes' default grace)."""
    leader_election: LeaderElectionSettings = field(default_factory=LeaderElectionSettings)


@dataclass(frozen=True)
class AgentSettings:
    """How the controller reads agentd in Active workspace pods (one scheduler for the fleet)
    and drains its sessions before replacing a pod."""

    port: int = 4098
    """``--agentd-health-port``: agentd's admin port in workspace pods (``/v1/healthz``,
    ``/v1/statusz``)."""
    concurrency: int = 64
    """``--agent-scrape-concurrency``: agentd requests in flight at once across the fleet,
    1..1024. A healthy answer takes milliseconds; the bound keeps a fleet of hung pods (each
    holding a request until its timeout) from opening thousands of connections."""
    health_interval: float = 15.0
    """``--agent-health-interval`` seconds (5s..10m, 15s): time between liveness checks of
    one workspace. Three failed checks in a row replace its pod."""
    status_interval: float = 60.0
    """``--agent-status-interval`` seconds (15s..1h, 1m): time between deep status reads
    (sessions, providers, usage) of one workspace."""
    drain_stall_bound: float = 3600.0
    """``--session-drain-stall-bound`` seconds (1m..24h, 1h): a recycle the controller starts
    waits for busy agent sessions to end, and is forced once they made no progress for this
    long."""


@dataclass(frozen=True)
class WorkspaceSettings:
    """What the Workspace reconciler builds pods and status from."""

    inference_relay_url: str = ""
    """``--inference-relay-url``: set as the fleet relay base URL on workspace containers; ""
    = not configured."""
    api_service_url: str = ""
    """``--api-service-url``: root URL of the in-cluster API (also relay staging's credential
    source)."""
    api_public_url: str = ""
    """``--api-public-url``: the API's public URL as workspaces should reach it; "" =
    ``https://api.<preview base domain>`` when that is set, else none."""
    default_runtime_class: str | None = None
    """``--default-runtime-class``: None = flag not given; "" = explicitly no runtime class."""
    preview_origin_base_domain: str = ""
    """``--preview-origin-base-domain``: base domain of workspace preview origins."""
    upload_staging: UploadStagingConfig = field(default_factory=UploadStagingConfig)
    """``--upload-staging`` (``budget=…,floor=…,concurrent=…,ttlMs=…,applyTimeoutMs=…``):
    agentd's upload staging knobs, as env on the containers that stage uploads; unset knobs
    keep agentd's defaults."""
    agentd_sidecar: bool = False
    """``--agentd-sidecar``: run agentd as a native sidecar (uid 2000) next to the workspace
    container instead of as its supervisor's in-process half. Needs ``--agentd-image``."""
    termination_grace: int = 40
    """``--workspace-termination-grace-seconds``: seconds a workspace pod gets to stop, at
    least ``MIN_TERMINATION_GRACE``. agentd's shutdown is serial: 25 s of HTTP drain, 5 s for
    background work, 5 s from SIGTERM to SIGKILL of its children; 40 adds a margin."""
    agentd: AgentdDelivery | None = None
    """agentd delivery flags when given (validated); used to label events and metrics."""
    opencode: OpencodeDelivery | None = None
    """opencode delivery flags when given (validated); used to label events and metrics."""
    excluded_namespaces: frozenset[str] = frozenset({ALWAYS_EXCLUDED})
    """``--excluded-namespaces`` plus kube-system and the controller's own namespace: the pod
    webhook never sees pods there, so no workspace pod is built there (the Workspace gets a
    Failed phase saying why)."""
    allowed_runtime_classes: frozenset[str] = frozenset()
    """``--allowed-runtime-classes``: classes any Workspace may name in ``spec.runtimeClass``;
    any other (and "") is run only in a namespace the platform labelled
    ``llmsafespaces.dev/allow-runtime-class-override=true`` (the webhook refuses the rest; the
    controller checks again before it builds a pod)."""
    egress: EgressSettings = field(default_factory=EgressSettings)
    """Per-Workspace egress policies."""
    ttl_action: TtlAction = "terminate"
    """``--workspace-ttl-action``: what becomes of a Workspace kept Suspended past its
    ``spec.ttlSecondsAfterSuspended``: ``terminate`` (default) deletes its volume and keeps it
    as phase Terminated, so the API and its users still see what became of it; ``delete``
    deletes the Workspace (its volume goes with it)."""
    trusted_writers: TrustedWriters = NO_TRUSTED_WRITERS
    """``--trusted-workspace-writers``: who may confirm a Workspace's owner (named in the
    condition that holds relay staging for a Workspace that predates the owner record)."""
    owner_record_upgrade: UpgradeMode = "adopt"
    """``--owner-record-upgrade``: a Workspace that predates the owner record gets it once
    (adopt: the controller asks the webhook for it, and the spec's owner is vouched) or waits
    for a trusted writer to confirm (hold: relay staging stays off meanwhile)."""
    agent: AgentSettings = field(default_factory=AgentSettings)
    """agentd health, deep status and session drains."""


@dataclass(frozen=True)
class RelayStagingSettings:
    """Relay-only key delivery flags, validated by arming (an unarmed start exits 85)."""

    enabled: bool = False
    """``--relay-only-key-delivery``: off = nothing relay-staging related happens."""
    router_url: str = DEFAULT_LLM_RELAY_ROUTER_URL
    """``--llm-relay-router-url``: the BYO resolve router's base URL."""
    namespace: str = "llm-relay"
    """``--llm-relay-namespace``: where the router, envelopes and key Secrets live."""
    token_ttl: float = 24 * 3600.0
    """``--relay-token-ttl`` in seconds (Go syntax on the command line, 24h default); arming
    requires 1 s..7 d."""
    revocation_staleness_bound: float = 120.0
    """``--relay-revocation-staleness-bound`` in seconds (10s..1h, 2m default): an Active
    Workspace's staging runs again within this long with no event, so an unbound credential
    is revoked, a rotated key re-sealed and agentd's health report re-read. Shorter costs
    one credential-source call and one health read per Workspace per period."""


@dataclass(frozen=True)
class RelayArtifactConfig:
    """Where relay VMs download the relay-proxy binary from, and its per-arch sha256.

    All required when the inference relay is enabled (checked by the relay controller): a VM
    without a download path boots a relay unit whose binary never arrives.
    """

    urls: tuple[str, ...] = ()
    """``--relay-artifact-url`` (comma list): base mirror URLs; cloud-init appends the binary
    name and tries each in turn."""
    sha256_arm64: str = ""
    """``--relay-artifact-sha256-arm64``: hex sha256 of the arm64 binary."""
    sha256_amd64: str = ""
    """``--relay-artifact-sha256-amd64``: hex sha256 of the amd64 binary."""


@dataclass(frozen=True)
class RelayTokenStoreSettings:
    """Where the real drivers store each relay VM's token, and the role the VM reads it with
    (never in user data). Required with the real drivers (checked by the relay controller)."""

    aws_instance_profile: str = ""
    """``--relay-aws-instance-profile``: name or ARN of the instance profile relay VMs boot
    with; its role reads the token parameters (``ssm:GetParameter`` on the prefix)."""
    aws_parameter_prefix: str = "/llmsafespaces/relay-token"
    """``--relay-aws-token-prefix``: the SSM Parameter Store path the tokens live under."""
    oci_vault: str = ""
    """``--relay-oci-vault``: OCID of the vault the tokens are secrets in."""
    oci_key: str = ""
    """``--relay-oci-key``: OCID of the vault's master encryption key for them."""


@dataclass(frozen=True)
class OrphanSweepSettings:
    """The leader-only sweep that deletes relay VMs whose InferenceRelay is gone."""

    interval: float = 300.0
    """``--orphan-sweep-interval`` seconds (5m): how often the sweep runs."""
    grace: float = 600.0
    """``--orphan-grace`` seconds (10m): a VM younger than this is never an orphan (its CR
    may not be visible yet)."""
    max_deletions_per_sweep: int = 10
    """``--orphan-max-deletions-per-sweep``: caps the damage of a wrong decision."""
    dry_run: bool = False
    """``--orphan-dry-run``: log what would be deleted, delete nothing."""
    regions: tuple[tuple[str, str], ...] = (("aws", "us-east-1"), ("oci", "us-ashburn-1"))
    """``--orphan-regions``: (provider, region) pairs swept even when no InferenceRelay names
    them, so the VMs of a CR deleted while the controller was down are still found."""


@dataclass(frozen=True)
class InferenceRelaySettings:
    """The InferenceRelay controller (cloud relay VMs) and its orphan sweep."""

    enabled: bool = False
    """``--enable-inference-relay``: register the InferenceRelay reconciler."""
    router_url: str = "http://relay-router:8080"
    """``--relay-router-url``: the relay router (health ``/metrics``, peers)."""
    artifact: RelayArtifactConfig = field(default_factory=RelayArtifactConfig)
    token_store: RelayTokenStoreSettings = field(default_factory=RelayTokenStoreSettings)
    cloud: str = ""
    """``--relay-cloud``: "" = the real cloud drivers, ``fake`` = in-process driver."""
    orphans: OrphanSweepSettings = field(default_factory=OrphanSweepSettings)
    cluster_id: str = ""
    """``--relay-cluster-id``: the value of every relay VM's cluster tag; "" = the UID of the
    kube-system namespace."""


@dataclass(frozen=True)
class ControllerSettings:
    """The whole controller configuration."""

    kubeconfig: str | None = None
    """``--kubeconfig``; None = ``$KUBECONFIG``, else the in-cluster service account."""
    log_level: str = "info"
    """``--log-level``: debug, info, warning or error."""
    namespace: str = DEFAULT_NAMESPACE
    """The controller's own namespace (``POD_NAMESPACE``)."""
    api_internal_token: str = field(default="", repr=False)
    """From ``LLMSAFESPACES_INTERNAL_TOKEN`` only; never logged, never in a repr."""
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    workspace: WorkspaceSettings = field(default_factory=WorkspaceSettings)
    relay_staging: RelayStagingSettings = field(default_factory=RelayStagingSettings)
    inference_relay: InferenceRelaySettings = field(default_factory=InferenceRelaySettings)


# -- flags ---------------------------------------------------------------------------------


def _bool_flag(group: argparse._ArgumentGroup, flag: str, help: str) -> None:
    # Parsed as text and checked in settings_from_args, so a bad value (flag or env) exits 1
    # with a message naming the flag instead of an argparse usage error.
    add_flag(group, flag, default="false", nargs="?", const="true", help=help)


def add_egress_flags(group: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The per-Workspace egress policy's flags (checked by ``egress_settings_from``)."""
    add_flag(
        group,
        "--workspace-egress",
        default="off",
        choices=["off", "networkpolicy", "cilium"],
        help="per-Workspace egress policy: NetworkPolicy, CiliumNetworkPolicy (toFQDNs) or off",
    )
    add_flag(
        group,
        "--workspace-egress-default",
        default="deny",
        choices=["deny", "allow"],
        help="egress of a Workspace declaring no domains: deny (DNS, platform only) or allow",
    )
    add_flag(
        group,
        "--workspace-egress-namespaces",
        default="",
        help="comma-separated namespaces every workspace pod may reach (API service, routers)",
    )
    add_flag(
        group,
        "--workspace-egress-allowed-cidrs",
        default="",
        help="comma-separated CIDRs a declared domain may resolve to although they are "
        "private, loopback, link-local, carrier-grade or the cluster's",
    )
    add_flag(
        group,
        "--workspace-egress-cluster-cidrs",
        default="",
        help="comma-separated Service and Pod CIDRs of the cluster: addresses a declared "
        "domain resolves to there are dropped",
    )
    add_flag(
        group,
        "--workspace-egress-ports",
        default=",".join(str(p) for p in DEFAULT_ALLOWED_PORTS),
        help="comma-separated ports a declared domain may be reached on",
    )
    add_flag(
        group,
        "--workspace-egress-dns-namespace",
        default="kube-system",
        help="namespace of the cluster's DNS pods, the only pods port 53 may go to",
    )
    add_flag(
        group,
        "--workspace-egress-dns-pod-labels",
        default="k8s-app=kube-dns",
        help="comma-separated key=value labels selecting the cluster's DNS pods",
    )
    add_flag(
        group,
        "--workspace-egress-dns-addresses",
        default="",
        help="comma-separated CIDRs of a node-local DNS cache port 53 may also go to",
    )


def add_controller_flags(parser: argparse.ArgumentParser) -> None:
    """Every ``wspin controller`` flag; each also reads ``WSPIN_<FLAG>``."""
    process = parser.add_argument_group("process")
    add_kubeconfig_flag(process)
    add_flag(process, "--health-port", default="8081", help="port of /healthz and /readyz")
    add_flag(process, "--metrics-port", default="8080", help="port of /metrics")
    add_flag(process, "--log-level", default="info", help="debug, info, warning or error")
    _bool_flag(process, "--enable-leader-election", "one active replica via a Lease")
    add_flag(process, "--max-concurrent-reconciles", default="16", help="workers, 1..64")

    workspace = parser.add_argument_group("workspace")
    add_flag(workspace, "--default-runtime-class", default=None, help="pod runtimeClassName")
    add_flag(
        workspace,
        TERMINATION_GRACE_FLAG,
        default=None,
        help=f"seconds a workspace pod gets to stop, {MIN_TERMINATION_GRACE}..86400 (default 40)",
    )
    add_flag(
        workspace,
        TERMINATION_GRACE_ALIAS,
        default=None,
        help=f"old name of {TERMINATION_GRACE_FLAG}",
    )
    add_excluded_namespaces_flag(workspace)
    add_runtime_classes_flag(workspace)
    add_workspace_writer_flags(workspace)
    add_flag(
        workspace,
        UPGRADE_FLAG,
        default="adopt",
        choices=list(UPGRADE_MODES),
        help="a Workspace that predates the owner record: adopt (record the spec's owner once) "
        "or hold (no relay staging until a trusted writer confirms)",
    )
    add_egress_flags(workspace)
    add_flag(
        workspace,
        "--workspace-ttl-action",
        default="terminate",
        help="a Workspace Suspended past spec.ttlSecondsAfterSuspended: terminate (delete its "
        "volume, keep it as Terminated) or delete it",
    )
    for flag in (
        "--inference-relay-url",
        "--api-service-url",
        "--api-public-url",
        "--preview-origin-base-domain",
    ):
        add_flag(workspace, flag, default="", help=flag.lstrip("-").replace("-", " "))
    add_flag(
        workspace,
        "--upload-staging",
        default="",
        help="upload staging knobs: budget=,floor=,concurrent=,ttlMs=,applyTimeoutMs=",
    )
    _bool_flag(
        workspace, "--agentd-sidecar", "run agentd as a native sidecar (needs --agentd-image)"
    )
    agent = parser.add_argument_group("agent health and session drains")
    add_flag(agent, "--agentd-health-port", default="4098", help="agentd's admin port in pods")
    add_flag(
        agent, "--agent-scrape-concurrency", default="64", help="agentd requests at once, 1..1024"
    )
    add_flag(agent, "--agent-health-interval", default="15s", help="liveness period, 5s..10m")
    add_flag(agent, "--agent-status-interval", default="1m", help="deep status period, 15s..1h")
    add_flag(
        agent,
        "--session-drain-stall-bound",
        default="1h",
        help="force a recycle after busy sessions made no progress this long, 1m..24h",
    )
    add_delivery_flags(parser)

    staging = parser.add_argument_group("relay staging")
    _bool_flag(staging, "--relay-only-key-delivery", "stage BYO keys through the relay router")
    add_flag(staging, "--llm-relay-router-url", default=DEFAULT_LLM_RELAY_ROUTER_URL, help="URL")
    add_flag(staging, "--llm-relay-namespace", default="llm-relay", help="relay namespace")
    add_flag(staging, "--relay-token-ttl", default="24h", help="token lifetime, 1s..7d")
    add_flag(
        staging,
        "--relay-revocation-staleness-bound",
        default="2m",
        help="longest time before a Workspace's staging runs again without an event, 10s..1h",
    )

    relay = parser.add_argument_group("inference relay")
    _bool_flag(relay, "--enable-inference-relay", "run the InferenceRelay controller")
    add_flag(relay, "--relay-router-url", default="http://relay-router:8080", help="router URL")
    add_flag(relay, "--relay-artifact-url", default="", help="comma list of mirror base URLs")
    add_flag(relay, "--relay-artifact-sha256-amd64", default="", help="amd64 binary sha256")
    add_flag(relay, "--relay-artifact-sha256-arm64", default="", help="arm64 binary sha256")
    add_flag(relay, "--relay-cloud", default="", help='"" for real drivers, or fake')
    add_flag(
        relay,
        "--relay-aws-instance-profile",
        default="",
        help="instance profile (name or ARN) relay VMs read their token with",
    )
    add_flag(
        relay,
        "--relay-aws-token-prefix",
        default="/llmsafespaces/relay-token",
        help="SSM Parameter Store path of the relay VM tokens",
    )
    add_flag(relay, "--relay-oci-vault", default="", help="OCI vault OCID for relay VM tokens")
    add_flag(relay, "--relay-oci-key", default="", help="OCI vault key OCID for relay VM tokens")
    add_flag(relay, "--orphan-sweep-interval", default="5m", help="Go duration")
    add_flag(relay, "--orphan-grace", default="10m", help="Go duration")
    add_flag(relay, "--orphan-max-deletions-per-sweep", default="10", help="count")
    _bool_flag(relay, "--orphan-dry-run", "log orphan deletions without deleting")
    add_flag(
        relay,
        "--orphan-regions",
        default="aws:us-east-1,oci:us-ashburn-1",
        help="comma-separated provider:region pairs the orphan sweep always covers",
    )
    add_flag(
        relay,
        "--relay-cluster-id",
        default="",
        help="value of the relay VMs' cluster tag (default: the kube-system namespace UID)",
    )


# -- parsing -------------------------------------------------------------------------------


def _flag_error(flag: str, message: str, fix: str) -> ConfigError:
    return ConfigError(f"{flag}: {message}", f"{fix} (flag {flag} or env {env_name(flag)})")


def _bool(flag: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    try:
        return parse_bool(str(value))
    except argparse.ArgumentTypeError:
        raise _flag_error(
            flag, f"expected true or false, got {value!r}", "pass true or false"
        ) from None


def _int(flag: str, value: object, low: int, high: int) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise _flag_error(
            flag, f"expected an integer, got {value!r}", "pass a whole number"
        ) from None
    if not low <= number <= high:
        raise _flag_error(
            flag, f"must be within {low}..{high}, got {number}", "pass a value in range"
        )
    return number


def _duration(flag: str, value: object) -> float:
    try:
        return parse_duration(str(value))
    except ValueError as err:
        raise _flag_error(flag, str(err), "use a Go duration such as 24h, 90m or 30s") from None


def _bounded_duration(flag: str, value: object, low: float, high: float) -> float:
    seconds = _duration(flag, value)
    if not low <= seconds <= high:
        raise _flag_error(
            flag,
            f"must be within {format_duration(low)}..{format_duration(high)}, got {value}",
            "pass a Go duration in range",
        )
    return seconds


def _delivery(kind: type[_D], args: argparse.Namespace) -> _D | None:
    name = kind.artifact.name
    given = kind(
        getattr(args, f"{name}_image"),
        getattr(args, f"{name}_binary_sha256_amd64"),
        getattr(args, f"{name}_binary_sha256_arm64"),
    )
    if not (given.image or given.binary_sha256_amd64 or given.binary_sha256_arm64):
        return None  # optional for the controller: only labels events and metrics
    given.validate()
    return given


def _lease_timings(environ: Mapping[str, str]) -> tuple[float, float, float]:
    timings: dict[str, float] = {}
    for name, variable in LEASE_TIMING_ENV.items():
        raw = environ.get(variable)
        if raw is None:
            continue
        try:
            timings[name] = parse_duration(raw)
        except ValueError as err:
            raise ConfigError(f"{variable}: {err}", f"unset {variable} or use e.g. 15s") from None
    defaults = LeaderElectionSettings()
    lease = timings.get("lease_duration", defaults.lease_duration)
    renew = timings.get("renew_deadline", defaults.renew_deadline)
    retry = timings.get("retry_period", defaults.retry_period)
    problem = LeaseSettings(
        lease_duration=lease, renew_deadline=renew, retry_period=retry
    ).timing_problem()
    if problem:
        raise ConfigError(problem, f"fix or unset {', '.join(LEASE_TIMING_ENV.values())}")
    return lease, renew, retry


def settings_from_args(
    args: argparse.Namespace, environ: Mapping[str, str] = os.environ
) -> ControllerSettings:
    """Build and check the settings once; ``ConfigError`` names the flag at fault."""
    log_level = str(args.log_level).strip().lower()
    if log_level not in LOG_LEVELS:
        raise _flag_error(
            "--log-level",
            f"unknown level {args.log_level!r}",
            f"use one of {', '.join(LOG_LEVELS)}",
        )
    health_port = _int("--health-port", args.health_port, 0, 65535)
    metrics_port = _int("--metrics-port", args.metrics_port, 0, 65535)
    if health_port == metrics_port and health_port != 0:
        raise _flag_error(
            "--metrics-port",
            f"equals --health-port ({health_port})",
            "give the two servers different ports",
        )
    requested = _int("--max-concurrent-reconciles", args.max_concurrent_reconciles, -(2**31), 2**31)
    workers = min(max(requested, MAX_CONCURRENT_RECONCILES[0]), MAX_CONCURRENT_RECONCILES[1])
    if workers != requested:
        log.warning(
            "--max-concurrent-reconciles clamped",
            extra={"fields": {"requested": requested, "used": workers}},
        )
    namespace = environ.get("POD_NAMESPACE") or DEFAULT_NAMESPACE
    lease_duration, renew_deadline, retry_period = _lease_timings(environ)
    identity = f"{environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"

    cloud = str(args.relay_cloud).strip()
    if cloud not in RELAY_CLOUDS:
        raise _flag_error("--relay-cloud", f"unknown cloud mode {cloud!r}", 'use "" or "fake"')
    orphan_interval = _duration("--orphan-sweep-interval", args.orphan_sweep_interval)
    if orphan_interval <= 0:
        raise _flag_error("--orphan-sweep-interval", "must be positive", "use e.g. 5m")
    orphan_grace = _duration("--orphan-grace", args.orphan_grace)
    if orphan_grace < 0:
        raise _flag_error("--orphan-grace", "must not be negative", "use e.g. 10m")

    agentd = _delivery(AgentdDelivery, args)
    opencode = _delivery(OpencodeDelivery, args)
    sidecar = _bool("--agentd-sidecar", args.agentd_sidecar)
    if sidecar and agentd is None:
        # The sidecar runs the digest-pinned agentd image itself: without it there is no
        # second container to run, and every workspace pod would fail to build.
        raise _flag_error(
            "--agentd-sidecar",
            "requires --agentd-image (the sidecar runs the digest-pinned agentd image)",
            "set --agentd-image / agentdDelivery.image, or turn the sidecar off "
            "(controller.agentdSidecar.enabled=false)",
        )
    try:
        upload_staging = parse_upload_staging(str(args.upload_staging))
    except ValueError as err:
        raise _flag_error(
            "--upload-staging", str(err), "fix controller.uploadStaging in the Helm values"
        ) from None

    return ControllerSettings(
        kubeconfig=args.kubeconfig or None,
        log_level=log_level,
        namespace=namespace,
        api_internal_token=environ.get(INTERNAL_TOKEN_ENV, ""),
        runtime=RuntimeSettings(
            health_port=health_port,
            metrics_port=metrics_port,
            bind_host="127.0.0.1" if 0 in (health_port, metrics_port) else None,
            max_concurrent_reconciles=workers,
            leader_election=LeaderElectionSettings(
                enabled=_bool("--enable-leader-election", args.enable_leader_election),
                namespace=namespace,
                identity=identity,
                lease_duration=lease_duration,
                renew_deadline=renew_deadline,
                retry_period=retry_period,
            ),
        ),
        workspace=WorkspaceSettings(
            inference_relay_url=args.inference_relay_url.strip(),
            api_service_url=args.api_service_url.strip(),
            api_public_url=args.api_public_url.strip(),
            default_runtime_class=args.default_runtime_class,
            preview_origin_base_domain=args.preview_origin_base_domain.strip(),
            upload_staging=upload_staging,
            agentd_sidecar=sidecar,
            termination_grace=_termination_grace(args),
            ttl_action=_ttl_action(args.workspace_ttl_action),
            agentd=agentd,
            opencode=opencode,
            excluded_namespaces=excluded_namespaces_from(
                args.excluded_namespaces,
                namespace,
                workspaces_namespace_from(args.workspaces_namespace),
            ),
            trusted_writers=trusted_writers_from(args.trusted_workspace_writers),
            owner_record_upgrade=upgrade_mode_from(args.owner_record_upgrade),
            agent=AgentSettings(
                port=_int("--agentd-health-port", args.agentd_health_port, 1, 65535),
                concurrency=_int(
                    "--agent-scrape-concurrency", args.agent_scrape_concurrency, 1, 1024
                ),
                health_interval=_bounded_duration(
                    "--agent-health-interval", args.agent_health_interval, 5.0, 600.0
                ),
                status_interval=_bounded_duration(
                    "--agent-status-interval", args.agent_status_interval, 15.0, 3600.0
                ),
                drain_stall_bound=_bounded_duration(
                    "--session-drain-stall-bound", args.session_drain_stall_bound, 60.0, 86400.0
                ),
            ),
            allowed_runtime_classes=runtime_classes_from(args.allowed_runtime_classes),
            egress=egress_settings_from(
                mode=args.workspace_egress,
                default=args.workspace_egress_default,
                namespaces=args.workspace_egress_namespaces,
                allowed_cidrs=args.workspace_egress_allowed_cidrs,
                cluster_cidrs=args.workspace_egress_cluster_cidrs,
                ports=args.workspace_egress_ports,
                dns_namespace=args.workspace_egress_dns_namespace,
                dns_pod_labels=args.workspace_egress_dns_pod_labels,
                dns_addresses=args.workspace_egress_dns_addresses,
            ),
        ),
        relay_staging=RelayStagingSettings(
            enabled=_bool("--relay-only-key-delivery", args.relay_only_key_delivery),
            router_url=args.llm_relay_router_url.strip(),
            namespace=args.llm_relay_namespace.strip(),
            token_ttl=_duration("--relay-token-ttl", args.relay_token_ttl),
            revocation_staleness_bound=_bounded_duration(
                "--relay-revocation-staleness-bound",
                args.relay_revocation_staleness_bound,
                10.0,
                3600.0,
            ),
        ),
        inference_relay=InferenceRelaySettings(
            enabled=_bool("--enable-inference-relay", args.enable_inference_relay),
            router_url=args.relay_router_url.strip(),
            artifact=RelayArtifactConfig(
                urls=tuple(u.strip() for u in args.relay_artifact_url.split(",") if u.strip()),
                sha256_arm64=args.relay_artifact_sha256_arm64.strip(),
                sha256_amd64=args.relay_artifact_sha256_amd64.strip(),
            ),
            token_store=RelayTokenStoreSettings(
                aws_instance_profile=args.relay_aws_instance_profile.strip(),
                aws_parameter_prefix=args.relay_aws_token_prefix.strip(),
                oci_vault=args.relay_oci_vault.strip(),
                oci_key=args.relay_oci_key.strip(),
            ),
            cloud=cloud,
            orphans=OrphanSweepSettings(
                interval=orphan_interval,
                grace=orphan_grace,
                max_deletions_per_sweep=_int(
                    "--orphan-max-deletions-per-sweep",
                    args.orphan_max_deletions_per_sweep,
                    0,
                    10_000,
                ),
                dry_run=_bool("--orphan-dry-run", args.orphan_dry_run),
                regions=_orphan_regions(args.orphan_regions),
            ),
            cluster_id=args.relay_cluster_id.strip(),
        ),
    )


def _ttl_action(value: str) -> TtlAction:
    for action in TTL_ACTIONS:
        if value == action:
            return action
    raise _flag_error(
        "--workspace-ttl-action",
        f"must be terminate or delete (got {value!r})",
        "set controller.workspaces.ttlAction to terminate or delete",
    )


def _termination_grace(args: argparse.Namespace) -> int:
    """``--workspace-termination-grace-seconds`` (or its former name), 36..86400."""
    given = args.workspace_termination_grace_seconds
    flag = TERMINATION_GRACE_FLAG
    if given is None and args.workspace_termination_grace is not None:
        given, flag = args.workspace_termination_grace, TERMINATION_GRACE_ALIAS
    if given is None:
        return WorkspaceSettings().termination_grace
    seconds = _int(flag, given, 0, 86400)
    if seconds < MIN_TERMINATION_GRACE:
        raise _flag_error(
            flag,
            f"{seconds} s is too short: agentd needs {MIN_TERMINATION_GRACE - 1} s to drain its "
            "sessions and stop",
            f"pass at least {MIN_TERMINATION_GRACE} (Helm value "
            "controller.workspaces.terminationGraceSeconds; default 40)",
        )
    return seconds


def _orphan_regions(text: str) -> tuple[tuple[str, str], ...]:
    """``provider:region`` pairs, comma-separated; "" sweeps only the regions CRs name."""
    pairs: list[tuple[str, str]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        provider, _, region = item.partition(":")
        if not (_REGION_PART.match(provider.strip()) and _REGION_PART.match(region.strip())):
            raise _flag_error(
                "--orphan-regions",
                f"item {item!r} is not provider:region",
                "use e.g. aws:us-east-1,oci:us-ashburn-1 "
                "(Helm: controller.inferenceRelay.orphanDetector.regions)",
            )
        pair = (provider.strip(), region.strip())
        if pair not in pairs:
            pairs.append(pair)
    return tuple(pairs)
