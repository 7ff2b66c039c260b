"""Each InferenceRelay's fleet as gauges, computed at scrape time from the controller's cache.

- ``llmsafespaces_relay_desired_instances{relay}``: provider slots in ``spec.providers`` (the
  fleet runs one VM per provider);
- ``llmsafespaces_relay_min_healthy_instances{relay}``: the healthy VMs the fleet must keep,
  ``spec.healthCheck.minHealthy`` (1 when unset) capped at the slots: the fleet's minimum;
- ``llmsafespaces_relay_healthy_instances{relay}``: instances in ``status.instances`` the
  router reports healthy (the status's ``healthyReplicas``);
- ``llmsafespaces_relay_instances{relay,state}``: instances by state (every state, 0 included).

``relay`` is the InferenceRelay's name: cluster-scoped objects an administrator creates, so the
series are bounded by the fleets that exist. Read from the cache, these need no bookkeeping in
the reconciler and show the same numbers as ``kubectl get inferencerelays``. Every replica
reports them from its own cache: aggregate with ``max`` over replicas.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from controller.relay.spec import STATES
from controller.types import Listable

DESIRED_METRIC = "llmsafespaces_relay_desired_instances"
MIN_HEALTHY_METRIC = "llmsafespaces_relay_min_healthy_instances"
HEALTHY_METRIC = "llmsafespaces_relay_healthy_instances"
INSTANCES_METRIC = "llmsafespaces_relay_instances"
_REPLICAS = " Reported by every controller replica from its cache: aggregate with max."


def desired_instances(relay: dict[str, object]) -> int:
    """Distinct providers in ``spec.providers`` (a duplicate is refused by the reconciler)."""
    spec = relay.get("spec")
    providers = spec.get("providers") if isinstance(spec, dict) else None
    if not isinstance(providers, list):
        return 0
    return len({str(p.get("provider")) for p in providers if isinstance(p, dict)})


def min_healthy_instances(relay: dict[str, object]) -> int:
    """``spec.healthCheck.minHealthy`` (1 when unset or not a number), never above the slots."""
    spec = relay.get("spec")
    check = spec.get("healthCheck") if isinstance(spec, dict) else None
    wanted = check.get("minHealthy", 1) if isinstance(check, dict) else 1
    if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 0:
        wanted = 1
    return min(wanted, desired_instances(relay))


def instances(relay: dict[str, object]) -> list[dict[str, object]]:
    status = relay.get("status")
    found = status.get("instances") if isinstance(status, dict) else None
    return [i for i in found if isinstance(i, dict)] if isinstance(found, list) else []


class RelayFleetCollector(Collector):
    """Desired, healthy and per-state instances of every InferenceRelay in the cache."""

    def __init__(self, relays: Listable) -> None:
        self.relays = relays

    def describe(self) -> list[GaugeMetricFamily]:
        return list(self._families())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        desired, minimum, healthy, by_state = self._families()
        for relay in sorted(self.relays.list(), key=_name):
            name = _name(relay)
            current = instances(relay)
            desired.add_metric([name], desired_instances(relay))
            minimum.add_metric([name], min_healthy_instances(relay))
            healthy.add_metric([name], sum(1 for i in current if i.get("healthy") is True))
            for state in STATES:
                by_state.add_metric(
                    [name, state], sum(1 for i in current if i.get("state") == state)
                )
        yield from (desired, minimum, healthy, by_state)

    @staticmethod
    def _families() -> tuple[
        GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily
    ]:
        return (
            GaugeMetricFamily(
                DESIRED_METRIC,
                "Provider slots of each InferenceRelay (one relay VM per provider)." + _REPLICAS,
                labels=["relay"],
            ),
            GaugeMetricFamily(
                MIN_HEALTHY_METRIC,
                "Healthy relay VMs each InferenceRelay must keep (spec.healthCheck.minHealthy, "
                "1 when unset, capped at its provider slots): the fleet's minimum." + _REPLICAS,
                labels=["relay"],
            ),
            GaugeMetricFamily(
                HEALTHY_METRIC,
                "Relay VMs of each InferenceRelay the router reports healthy." + _REPLICAS,
                labels=["relay"],
            ),
            GaugeMetricFamily(
                INSTANCES_METRIC,
                "Relay VMs of each InferenceRelay by state (provisioning, healthy, unhealthy, "
                "draining, quota-exhausted, terminated, provisioning-failed)." + _REPLICAS,
                labels=["relay", "state"],
            ),
        )


def _name(relay: dict[str, object]) -> str:
    metadata = relay.get("metadata")
    return str(metadata.get("name", "")) if isinstance(metadata, dict) else ""
