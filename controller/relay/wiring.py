"""Registers the InferenceRelay controller and the orphan sweep (``setup_relay_controller``).

Everything is checked here, at start, before the manager runs: the artifact settings and
the cloud drivers. A problem exits 1 with a message naming the flag.
"""

from __future__ import annotations

from controller.relay.artifact import validate_artifacts
from controller.relay.deps import RelayDeps
from controller.relay.drivers.select import build_drivers
from controller.relay.health import RouterHealth
from controller.relay.metrics import RelayMetrics
from controller.relay.orphans import OrphanDetector, OrphanPolicy
from controller.relay.reconciler import InferenceRelayReconciler
from controller.relay.shapes import DEFAULT_REGIONS
from controller.runtime.manager import Manager
from controller.settings import ControllerSettings
from wspin.resources import INFERENCE_RELAYS


def register(manager: Manager, settings: ControllerSettings) -> None:
    relay = settings.inference_relay
    validate_artifacts(relay.artifact)
    drivers = build_drivers(relay.cloud, manager.kube, settings.namespace)
    metrics = RelayMetrics(manager.registry)
    deps = RelayDeps(
        kube=manager.kube,
        namespace=settings.namespace,
        drivers=drivers,
        artifacts=relay.artifact,
        metrics=metrics,
        health=RouterHealth(relay.router_url),
    )
    reconciler = InferenceRelayReconciler(deps, manager.cache(INFERENCE_RELAYS))
    manager.add_controller(reconciler, for_=INFERENCE_RELAYS)
    manager.add_cleanup(reconciler.close, each_term=True)  # launches are leader-only work
    detector = OrphanDetector(
        manager.kube,
        drivers,
        metrics,
        policy=OrphanPolicy(
            grace_seconds=relay.orphans.grace,
            max_deletions=relay.orphans.max_deletions_per_sweep,
            dry_run=relay.orphans.dry_run,
        ),
        # The admin API's default regions are swept even when no CR names them, so VMs of a
        # CR deleted while the controller was down are found with no CR left to point at them.
        extra_regions={provider: [DEFAULT_REGIONS[provider]] for provider in drivers},
    )

    async def sweep() -> None:
        await detector.sweep()

    manager.add_periodic(
        "relay-orphan-sweep", relay.orphans.interval, sweep, leader_only=True, run_at_start=True
    )
