"""The surge bound of relay replacements, named for its rule: however a fleet stands, the
replacements in flight after a pass that launches one (a first launch or a relaunch after a
failed one's backoff) never exceed ``spec.healthCheck.maxSurge``; with ``maxSurge`` 0 none
launches beside its VM at all, and a replacement waiting to be launched again gives way to a
replacement in place.

Fleets are made up by hypothesis over up to three slots, each VM serving, unhealthy past or
within the replacement timeout, or still booting, each with no replacement, a replacement
waiting to be launched again (its backoff over or not), one booting or one serving.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.relay.actions import FleetPlan, Launch, Observation
from controller.relay.drivers.base import CloudInstance
from controller.relay.health import HealthReport, RelayHealth
from controller.relay.plan import plan_fleet
from controller.relay.replacement import TAG_REPLACES
from controller.relay.spec import ProviderSpec, RelaySpec, has_real_id
from wspin.core.clock import format_time

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
UID = "uid-1"
TIMEOUT = 600.0
REGIONS = {"aws": "us-east-1", "oci": "us-ashburn-1", "fake": "local"}
TAGS = {"managed-by": "llmsafespaces-relay", "inferencerelay-uid": UID}


def _vm(entry: Obj, replaces: str = "") -> CloudInstance:
    tags = TAGS | {"inferencerelay-provider": str(entry["provider"])}
    if replaces:
        tags[TAG_REPLACES] = replaces
    launched = NOW - timedelta(hours=2)
    return CloudInstance(
        str(entry["id"]), str(entry["region"]), "running", "192.0.2.1", tags, launched
    )


def _current(provider: str, kind: str, unhealthy_for: float) -> Obj:
    stamp = format_time(NOW - timedelta(hours=2))
    entry: Obj = {
        "id": f"{provider}-vm-a",
        "provider": provider,
        "region": REGIONS[provider],
        "publicIP": "192.0.2.1",
        "state": kind,
        "healthy": kind == "healthy",
        "lastCheck": stamp,
        "launchedAt": stamp,
    }
    if kind == "unhealthy":
        entry["unhealthySince"] = format_time(NOW - timedelta(seconds=unhealthy_for))
    return entry


def _spare(provider: str, kind: str, failures: int, last_try: float) -> Obj:
    """The slot's replacement: ``relaunch`` a placeholder whose launches failed ``failures``
    times, the last ``last_try`` seconds ago; ``booting`` or ``serving`` a VM."""
    current = f"{provider}-vm-a"
    entry: Obj = {
        "provider": provider,
        "region": REGIONS[provider],
        "replaces": current,
        "tokenKey": f"{provider}.2",
        "lastCheck": format_time(NOW - timedelta(seconds=last_try)),
    }
    if kind == "relaunch":
        entry |= {"id": f"{provider}-replacement", "publicIP": "", "state": "provisioning",
                  "healthy": False, "launchFailures": failures}  # fmt: skip
    else:
        entry |= {"id": f"{provider}-vm-b", "publicIP": "192.0.2.2",
                  "state": "healthy" if kind == "serving" else "provisioning",
                  "healthy": kind == "serving", "launchedAt": entry["lastCheck"]}  # fmt: skip
    return entry


Fleet = tuple[RelaySpec, Obj, Observation, HealthReport]


@st.composite
def fleets(draw: st.DrawFn) -> Fleet:
    providers = draw(st.lists(st.sampled_from(list(REGIONS)), min_size=1, max_size=3, unique=True))
    spec = RelaySpec(
        upstream_url="https://u.example",
        providers=tuple(ProviderSpec(p, REGIONS[p], "c") for p in providers),
        replacement_timeout_seconds=TIMEOUT,
        max_surge=draw(st.integers(0, 3)),
        min_healthy=draw(st.integers(0, 3)),
    )
    instances: list[Obj] = []
    vms: list[CloudInstance] = []
    relays: dict[str, RelayHealth] = {}
    for provider in providers:
        kind = draw(st.sampled_from(["healthy", "unhealthy", "unhealthy", "provisioning"]))
        current = _current(provider, kind, draw(st.sampled_from([10.0, TIMEOUT, 3 * TIMEOUT])))
        instances.append(current)
        vms.append(_vm(current))
        relays[current["id"]] = RelayHealth(healthy=kind == "healthy")
        spare_kind = draw(st.sampled_from(["none", "relaunch", "relaunch", "booting", "serving"]))
        if spare_kind == "none":
            continue
        failures = draw(st.integers(1, 3))
        spare = _spare(provider, spare_kind, failures, draw(st.sampled_from([5.0, 3600.0])))
        instances.append(spare)
        if spare_kind != "relaunch":
            vms.append(_vm(spare, replaces=current["id"]))
            relays[spare["id"]] = RelayHealth(healthy=spare_kind == "serving")
    observation = Observation(vms=vms, drivers=set(REGIONS))
    return spec, {"instances": instances}, observation, HealthReport(relays=relays)


def _surges(plan: FleetPlan) -> list[Launch]:
    """The launches of a replacement beside its VM (first launches and relaunches alike)."""
    return [a for a in plan.launches if isinstance(a, Launch) and a.replaces]


def _in_flight(plan: FleetPlan) -> int:
    """Replacements launching or booting once the plan is carried out."""
    booting = sum(
        1 for i in plan.instances if i.get("replaces") and has_real_id(i) and not i.get("healthy")
    )
    return booting + len(_surges(plan))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_a_relaunched_relay_replacement_never_exceeds_max_surge(fleet: Fleet) -> None:
    spec, status, observation, health = fleet
    plan = plan_fleet(spec, status, observation, health, uid=UID, now=NOW)
    surges = _surges(plan)
    if spec.max_surge == 0:
        assert surges == [], "a replacement launched beside its VM with maxSurge 0"
    if surges:
        assert _in_flight(plan) <= spec.max_surge, (
            f"{_in_flight(plan)} replacements in flight, maxSurge {spec.max_surge}"
        )


def _waiting_relaunches(count: int) -> Fleet:
    """``count`` slots, each VM unhealthy past the timeout, its replacement's backoff over."""
    providers = list(REGIONS)[:count]
    spec = RelaySpec(
        upstream_url="https://u.example",
        providers=tuple(ProviderSpec(p, REGIONS[p], "c") for p in providers),
        replacement_timeout_seconds=TIMEOUT,
        max_surge=1,
    )
    instances: list[Obj] = []
    for provider in providers:
        instances += [
            _current(provider, "unhealthy", 3 * TIMEOUT),
            _spare(provider, "relaunch", 1, 3600.0),
        ]
    vms = [_vm(i) for i in instances if has_real_id(i)]
    relays = {str(i["id"]): RelayHealth(healthy=False) for i in instances if has_real_id(i)}
    observation = Observation(vms=vms, drivers=set(REGIONS))
    return spec, {"instances": instances}, observation, HealthReport(relays=relays)


def test_relaunches_due_together_launch_one_at_a_time_under_max_surge_one() -> None:
    spec, status, observation, health = _waiting_relaunches(3)
    plan = plan_fleet(spec, status, observation, health, uid=UID, now=NOW)
    assert [a.replaces for a in _surges(plan)] == ["aws-vm-a"]
    held = [h for h in plan.held if "spec.healthCheck.maxSurge is 1" in h]
    assert len(held) == 2


def test_with_max_surge_zero_a_waiting_replacement_gives_way_to_a_replacement_in_place() -> None:
    spec, status, observation, health = _waiting_relaunches(1)
    spec = RelaySpec(spec.upstream_url, spec.providers, TIMEOUT, max_surge=0)
    plan = plan_fleet(spec, status, observation, health, uid=UID, now=NOW)
    assert _surges(plan) == []
    assert [(d.instance_id, d.reason) for d in plan.destroys] == [("aws-vm-a", "unhealthy")]
    assert [a.replaces for a in plan.launches] == [""]
    assert not [i for i in plan.instances if i.get("replaces")]
