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
from controller.settings import ControllerSettings, RelayArtifactConfig
from controller.staging.arming import (
    ARMING_STARTUP_GUARD_WINDOW,
    RELAY_STAGING_NOT_ARMED_EXIT_CODE,
    RelayStagingConfig,
    relay_staging_exit_code_for,
    setup_relay_staging,
)
from controller.workspace.pod.credential_keys import CredentialKeys, load_credential_keys
from wspin.core.delivery import AgentdDelivery, OpencodeDelivery
from wspin.core.kinds import INFERENCE_RELAYS, NAMESPACES, WORKSPACES
from wspin.core.redact import Redactor
from wspin.core.runtimes import RUNTIME_ENVIRONMENTS
from wspin.kube.client import Kube
from wspin.kube.preflight import StartNeeds

__all__ = [
    "ARMING_STARTUP_GUARD_WINDOW",
    "RELAY_STAGING_NOT_ARMED_EXIT_CODE",
    "AgentdDelivery",
    "OpencodeDelivery",
    "RelayArtifactConfig",
    "RelayStagingConfig",
    "check_settings",
    "load_credential_keys",
    "new_manager",
    "relay_staging_exit_code_for",
    "setup_controllers",
    "setup_relay_controller",
    "setup_relay_staging",
    "start_needs",
]

log = logging.getLogger("controller")


def check_settings(settings: ControllerSettings) -> None:
    """Every check of the flags that needs no I/O, run before the first API call: a setting
    the reconcilers would refuse at registration is refused here, whatever the API server
    (unreachable, empty) would have said first. ``ConfigError`` names the flag."""
    if settings.inference_relay.enabled:
        from controller.relay import wiring

        wiring.check(settings)


def start_needs(settings: ControllerSettings) -> StartNeeds:
    """What the controller needs of the API server before it starts (``check_api_server``)."""
    watched = [WORKSPACES, RUNTIME_ENVIRONMENTS, NAMESPACES]
    if settings.inference_relay.enabled:
        watched.append(INFERENCE_RELAYS)
    return StartNeeds(
        process="controller",
        namespace=settings.namespace,
        namespace_fix="set POD_NAMESPACE to the namespace the controller runs in (the chart "
        "sets it to the release namespace, helm install -n NAMESPACE) and create it first",
        watched=tuple(watched),
        rbac_fix="install the chart's controller ClusterRole and binding (list and watch on "
        "workspaces, runtimeenvironments, inferencerelays and namespaces) for the controller's "
        "ServiceAccount",
        credentials_fix="point --kubeconfig (or KUBECONFIG) at the cluster, or run in a pod "
        "whose ServiceAccount token the API server accepts",
    )


def new_manager(
    kube: Kube, settings: ControllerSettings, *, registry: CollectorRegistry | None = None
) -> Manager:
    """A manager configured from ``settings`` (``registry``: a private one for tests)."""
    return Manager(kube, settings.runtime, registry=registry)


def setup_controllers(
    manager: Manager,
    settings: ControllerSettings,
    *,
    credential_keys: CredentialKeys,
    relay_staging: RelayStagingConfig | None = None,
    redactor: Redactor | None = None,
) -> None:
    """Register the Workspace reconciler (and what it owns) with ``manager``.

    ``credential_keys`` is what every workspace's credentials are derived from
    (``load_credential_keys``, read at start: generated on first start, ``ConfigError`` when
    malformed or unreadable, and the process exits 1).

    ``relay_staging`` is the armed staging config (None: staging off); when armed, the
    per-workspace staging pass is built here and handed to the Workspace reconciler. It
    registers every staged key with ``redactor``, the process's one redactor, whose
    ``redact`` the process has added to the log formatter (None: a private one, for tests).
    """
    from controller.workspace import wiring

    redactor = redactor if redactor is not None else Redactor()
    if relay_staging is None:
        wiring.register(manager, settings, keys=credential_keys, redact=redactor.redact)
        return
    from controller.staging.ownership import WorkspaceNames
    from controller.staging.staging_pass import RelayStagingPass

    # Relay identities span namespaces: the pass asks this index, fed by the Workspace
    # cache, who holds a name. What the pod applied (agentd's health report) reaches the pass
    # in the Workspace it is given: the Workspace reconciler's agent scheduler reads it.
    names = WorkspaceNames()
    manager.cache(WORKSPACES).add_handler(names.observe)
    staging = RelayStagingPass(
        relay_staging,
        manager.kube,
        redactor=redactor,
        names=names,
        staleness_bound=settings.relay_staging.revocation_staleness_bound,
        confirmers=settings.workspace.trusted_writers.describe(),
    )
    manager.add_cleanup(staging.close)
    wiring.register(
        manager, settings, keys=credential_keys, staging=staging, redact=redactor.redact
    )


def setup_relay_controller(manager: Manager, settings: ControllerSettings) -> None:
    """Register the InferenceRelay reconciler and the orphan sweep, when the relay is on."""
    if not settings.inference_relay.enabled:
        log.info("inference relay disabled (--enable-inference-relay=false)")
        return
    from controller.relay import wiring

    wiring.register(manager, settings)
