"""Each InferenceRelay's desired, healthy and per-state VMs, from the cache at scrape time."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.relay.fleet_metrics import RelayFleetCollector
from controller.relay.spec import STATES


class Cached:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def list(self) -> list[dict[str, Any]]:
        return self.items


def relay(name: str, providers: list[str], instances: list[tuple[str, bool]]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"providers": [{"provider": p, "region": "r"} for p in providers]},
        "status": {
            "instances": [
                {"id": f"i-{n}", "provider": "aws", "state": state, "healthy": healthy}
                for n, (state, healthy) in enumerate(instances)
            ]
        },
    }


def scrape(items: list[dict[str, Any]]) -> dict[str, dict[tuple[str, ...], float]]:
    registry = CollectorRegistry()
    registry.register(RelayFleetCollector(Cached(items)))
    found: dict[str, dict[tuple[str, ...], float]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sample.labels.values())] = sample.value
    return found


def test_a_fleet_below_its_provider_slots_shows_fewer_healthy_than_desired() -> None:
    found = scrape(
        [
            relay("main", ["aws", "oci"], [("healthy", True), ("provisioning-failed", False)]),
            relay("backup", ["aws"], [("healthy", True)]),
        ]
    )
    assert found["llmsafespaces_relay_desired_instances"] == {("main",): 2.0, ("backup",): 1.0}
    assert found["llmsafespaces_relay_min_healthy_instances"] == {("main",): 1.0, ("backup",): 1.0}
    assert found["llmsafespaces_relay_healthy_instances"] == {("main",): 1.0, ("backup",): 1.0}
    main = {
        state: v
        for (name, state), v in found["llmsafespaces_relay_instances"].items()
        if name == "main"
    }
    assert main == {
        state: (1.0 if state in ("healthy", "provisioning-failed") else 0.0) for state in STATES
    }


def test_a_malformed_relay_counts_nothing_rather_than_failing_the_scrape() -> None:
    broken: dict[str, Any] = {
        "metadata": {"name": "broken"},
        "spec": {"providers": "aws"},
        "status": {"instances": [None, "x", {"state": "healthy", "healthy": "yes"}]},
    }
    found = scrape([broken, relay("dup", ["aws", "aws"], [])])
    assert found["llmsafespaces_relay_desired_instances"] == {("broken",): 0.0, ("dup",): 1.0}
    assert found["llmsafespaces_relay_healthy_instances"][("broken",)] == 0.0
    assert found["llmsafespaces_relay_instances"][("broken", "healthy")] == 1.0


def test_the_minimum_is_the_specs_min_healthy_capped_at_the_slots() -> None:
    def with_minimum(name: str, value: Any, providers: list[str]) -> dict[str, Any]:
        relay_ = relay(name, providers, [])
        relay_["spec"]["healthCheck"] = {"minHealthy": value}
        return relay_

    found = scrape(
        [
            with_minimum("two", 2, ["aws", "oci"]),
            with_minimum("capped", 5, ["aws"]),
            with_minimum("none", 0, ["aws"]),
            with_minimum("garbage", "lots", ["aws", "oci"]),
            with_minimum("negative", -3, ["aws"]),
        ]
    )
    assert found["llmsafespaces_relay_min_healthy_instances"] == {
        ("two",): 2.0,
        ("capped",): 1.0,
        ("none",): 0.0,
        ("garbage",): 1.0,
        ("negative",): 1.0,
    }
