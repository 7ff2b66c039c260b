"""The controller's entry points: build the manager, arm relay staging, and register the
reconcilers (``setup_controllers``, ``setup_relay_controller``).

This is the one module that knows every reconciler package: each package's
``wiring.register`` takes what it needs as arguments, so no reconciler imports another, and
relay staging is handed to the Workspace reconciler from here. The packages are imported
inside the functions, so importing this module stays cheap and a process with the relay off
never loads the relay's cloud drivers.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry

from controller.runtime.manager import Manager
from controller.runtime.options import LeaderElection, ManagerOptions
from controller.settings import ControllerSettings, RelayArtifactConfig
from controller.staging.arming import (
    ARMING_STARTUP_GUARD_WINDOW,
    RELAY_STAGING_NOT_ARMED_EXIT_CODE,
    RelayStagingConfig,
    relay_staging_exit_code_for,
    setup_relay_staging,
)
from controller.workspace.credential_keys import CredentialKeys, load_credential_keys
from wspin.core.delivery import AgentdDelivery, OpencodeDelivery
from wspin.core.kinds import PODS, WORKSPACES
from wspin.core.logs import add_scrubber
from wspin.kube.client import Kube

__all__ = [
    "ARMING_STARTUP_GUARD_WINDOW",
    "RELAY_STAGING_NOT_ARMED_EXIT_CODE",
    "AgentdDelivery",
    "OpencodeDelivery",
    "RelayArtifactConfig",
    "RelayStagingConfig",
    "load_credential_keys",
    "manager_options",
    "new_manager",
    "relay_staging_exit_code_for",
    "setup_controllers",
    "setup_relay_controller",
    "setup_relay_staging",
]

log = logging.getLogger("controller")


def manager_options(settings: ControllerSettings) -> ManagerOptions:
    """The manager's options from the process settings."""
    runtime = settings.runtime
    election = runtime.leader_election
    return ManagerOptions(
        health_port=runtime.health_port,
        metrics_port=runtime.metrics_port,
        bind_host=runtime.bind_host,
        max_concurrent_reconciles=runtime.max_concurrent_reconciles,
        graceful_shutdown_timeout=runtime.graceful_shutdown_timeout,
        leader_election=LeaderElection(
            enabled=election.enabled,
            namespace=election.namespace,
            name=election.name,
            identity=election.identity,
            lease_duration=election.lease_duration,
            renew_deadline=election.renew_deadline,
            retry_period=election.retry_period,
        ),
    )


def new_manager(
    kube: Kube, settings: ControllerSettings, *, registry: CollectorRegistry | None = None
) -> Manager:
    """A manager configured from ``settings`` (``registry``: a private one for tests)."""
    return Manager(kube, manager_options(settings), registry=registry)


def setup_controllers(
    manager: Manager,
    settings: ControllerSettings,
    *,
    credential_keys: CredentialKeys,
    relay_staging: RelayStagingConfig | None = None,
) -> None:
    """Register the Workspace reconciler (and what it owns) with ``manager``.

    ``credential_keys`` is what every workspace's credentials are derived from
    (``load_credential_keys``, read at start: generated on first start, ``ConfigError`` when
    malformed or unreadable, and the process exits 1).

    ``relay_staging`` is the armed staging config (None: staging off); when armed, the
    per-workspace staging pass is built here and handed to the Workspace reconciler, with
    its redactor registered with the log formatter so no staged key reaches a log line.
    """
    from controller.workspace import wiring

    if relay_staging is None:
        wiring.register(manager, settings, keys=credential_keys)
        return
    from controller.staging.health import HealthScraper
    from controller.staging.ownership import WorkspaceNames
    from controller.staging.redact import Redactor
    from controller.staging.staging_pass import RelayStagingPass

    # One redactor per process: the pass registers each staged key with it, and every
    # rendered log line goes through it.
    redactor = Redactor()
    add_scrubber(redactor.redact)
    # Relay identities span namespaces: the pass asks this index, fed by the Workspace
    # cache, who holds a name; agentd's health is read from pods in the pod cache.
    names = WorkspaceNames()
    manager.cache(WORKSPACES).add_handler(names.observe)
    staging = RelayStagingPass(
        relay_staging,
        manager.kube,
        redactor=redactor,
        names=names,
        pods=manager.cache(PODS, labels=wiring.OWNED_SELECTOR),
        health=HealthScraper(manager.registry, port=settings.relay_staging.agentd_health_port),
        staleness_bound=settings.relay_staging.revocation_staleness_bound,
    )
    manager.add_cleanup(staging.close)
    wiring.register(manager, settings, keys=credential_keys, staging=staging)


def setup_relay_controller(manager: Manager, settings: ControllerSettings) -> None:
    """Register the InferenceRelay reconciler and the orphan sweep, when the relay is on."""
    if not settings.inference_relay.enabled:
        log.info("inference relay disabled (--enable-inference-relay=false)")
        return
    from controller.relay import wiring

    wiring.register(manager, settings)
