"""Registers the InferenceRelay controller and the orphan sweep (``setup_relay_controller``).

Everything is checked here, at start, before the manager runs: the artifact settings, where
the VM tokens are stored, the cluster id and the cloud drivers. A problem exits 1 with a
message naming the flag.
"""

from __future__ import annotations

from controller.relay.artifact import validate_artifacts
from controller.relay.deps import RelayDeps
from controller.relay.drivers.select import build_drivers, check_cloud
from controller.relay.fleet_metrics import RelayFleetCollector
from controller.relay.health import RouterHealth, check_router_url
from controller.relay.identity import ClusterIdentity, check_cluster_id
from controller.relay.metrics import RelayMetrics
from controller.relay.orphans import OrphanDetector, OrphanPolicy
from controller.relay.reconciler import InferenceRelayReconciler
from controller.relay.tokenstore import validate_token_store
from controller.runtime.manager import Manager
from controller.settings import ControllerSettings
from wspin.core.kinds import INFERENCE_RELAYS


def check(settings: ControllerSettings) -> None:
    """The relay's flags, judged without I/O: ``ConfigError`` names the first broken one."""
    relay = settings.inference_relay
    validate_artifacts(relay.artifact)
    check_cluster_id(relay.cluster_id)
    check_router_url(relay.router_url)
    check_cloud(relay.cloud)
    validate_token_store(relay.token_store, relay.cloud)


def register(manager: Manager, settings: ControllerSettings) -> None:
    relay = settings.inference_relay
    check(settings)
    cluster = ClusterIdentity(manager.kube, relay.cluster_id)
    drivers = build_drivers(relay.cloud, manager.kube, settings.namespace, relay.token_store)
    metrics = RelayMetrics(manager.registry)
    deps = RelayDeps(
        kube=manager.kube,
        namespace=settings.namespace,
        drivers=drivers,
        artifacts=relay.artifact,
        metrics=metrics,
        cluster=cluster,
        health=RouterHealth(relay.router_url),
    )
    manager.add_controller(
        InferenceRelayReconciler(deps, manager.cache(INFERENCE_RELAYS)), for_=INFERENCE_RELAYS
    )
    # Each fleet's desired and healthy VMs, read from the same cache at scrape time.
    manager.registry.register(RelayFleetCollector(manager.cache(INFERENCE_RELAYS)))
    regions: dict[str, list[str]] = {}
    for provider, region in relay.orphans.regions:
        if provider in drivers:
            regions.setdefault(provider, []).append(region)
    detector = OrphanDetector(
        manager.kube,
        drivers,
        metrics,
        cluster,
        policy=OrphanPolicy(
            grace_seconds=relay.orphans.grace,
            max_deletions=relay.orphans.max_deletions_per_sweep,
            dry_run=relay.orphans.dry_run,
        ),
        regions=regions,
    )

    async def sweep() -> None:
        await detector.sweep()

    manager.add_periodic(
        "relay-orphan-sweep", relay.orphans.interval, sweep, leader_only=True, run_at_start=True
    )
