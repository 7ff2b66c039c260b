"""The controller's entry points, named after the seed's (``SetupControllers`` →
``setup_controllers`` and so on), and the agent runtime registry.

Reconciler packages register themselves through ``<package>.wiring.register(manager,
settings)``; they are imported here lazily, inside the function, so importing this module
stays cheap, and a missing wiring module fails loudly at start (an ImportError), never as a
silently skipped controller.
"""

from __future__ import annotations

import importlib
import logging
from typing import Final

from controller.runtime.manager import Manager
from controller.settings import ControllerSettings, RelayArtifactConfig
from controller.staging.arming import (
    ARMING_STARTUP_GUARD_WINDOW,
    RELAY_STAGING_NOT_ARMED_EXIT_CODE,
    RelayStagingConfig,
    relay_staging_exit_code_for,
    setup_relay_staging,
)
from wspin.delivery import AgentdDelivery, OpencodeDelivery

__all__ = [
    "ARMING_STARTUP_GUARD_WINDOW",
    "OPENCODE_RUNTIME",
    "RELAY_STAGING_NOT_ARMED_EXIT_CODE",
    "AgentdDelivery",
    "OpencodeDelivery",
    "RelayArtifactConfig",
    "RelayStagingConfig",
    "agent_runtimes",
    "register_agent_runtime",
    "relay_staging_exit_code_for",
    "setup_controllers",
    "setup_relay_controller",
    "setup_relay_staging",
]

log = logging.getLogger("controller")

OPENCODE_RUNTIME: Final = "opencode"
"""The agent runtime workspaces run today; the registry leaves room for others."""

_agent_runtimes: set[str] = set()


def register_agent_runtime(name: str = OPENCODE_RUNTIME) -> None:
    """Record an agent runtime the controller can build workspaces for (idempotent).

    Called once from the controller's start-up, the one place allowed to decide which
    runtimes exist; reconcilers ask ``agent_runtimes()`` instead of importing runtimes."""
    _agent_runtimes.add(name)


def agent_runtimes() -> frozenset[str]:
    """The registered agent runtime names."""
    return frozenset(_agent_runtimes)


def setup_controllers(
    manager: Manager,
    settings: ControllerSettings,
    *,
    relay_staging: RelayStagingConfig | None = None,
) -> None:
    """Register the Workspace reconciler (and what it owns) with ``manager``.

    ``relay_staging`` is the armed staging config (None: staging off); when armed it is
    passed on as ``register(..., relay_staging=config)`` for the per-workspace staging pass.
    """
    wiring = importlib.import_module("controller.workspace.wiring")
    if relay_staging is None:
        wiring.register(manager, settings)
    else:
        wiring.register(manager, settings, relay_staging=relay_staging)


def setup_relay_controller(manager: Manager, settings: ControllerSettings) -> None:
    """Register the InferenceRelay reconciler and the orphan sweep, when the relay is on."""
    if not settings.inference_relay.enabled:
        log.info("inference relay disabled (--enable-inference-relay=false)")
        return
    wiring = importlib.import_module("controller.relay.wiring")
    wiring.register(manager, settings)
