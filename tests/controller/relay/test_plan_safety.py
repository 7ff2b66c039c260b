"""The safety rules of ``plan_fleet`` as behaviour, beside the goldens (which a refresh would
accept): each rule is checked over every golden input, and over fleets hypothesis makes up.

- Another relay's VMs are never touched: adding them to any observation, even tagged as
  replacing one of ours, changes nothing in the plan.
- A placeholder never reaches destroy.
- A provider whose listing failed loses no VM to a guess (nothing destroyed as gone or as a
  duplicate).
- The surge bound: a replacement starts beside its VM only while fewer than ``maxSurge`` are
  launching or booting, never with ``maxSurge`` 0; in place, one slot at a time, and never
  while a slot's VM boots.
- The healthy minimum: a VM the router reports healthy is retired for a replacement only if
  at least ``minHealthy`` healthy relays remain.
- A slot holds at most two entries, at most one of them a replacement.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.relay.actions import Destroy, FleetPlan, Launch, Observation
from controller.relay.drivers.base import CloudInstance
from controller.relay.health import HealthReport, RelayHealth
from controller.relay.plan import plan_fleet
from controller.relay.replacement import TAG_REPLACES
from controller.relay.spec import ProviderSpec, RelaySpec, has_real_id
from tests.controller.relay import plan_cases
from tests.controller.relay.plan_cases import CASES, plan_case, render
from wspin.core.clock import format_time

NOW = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
UID = "uid-1"
FOREIGN = "uid-other-relay"
REGIONS = {"aws": "us-east-1", "oci": "us-ashburn-1"}


def _foreign(observation: Observation) -> list[CloudInstance]:
    """Another relay's VMs wherever this case looks, one tagged as replacing each of ours."""
    ours = [vm.instance_id for vm in observation.vms]
    regions = {vm.region for vm in observation.vms} | set(REGIONS.values())
    made = []
    for n, region in enumerate(sorted(regions)):
        for provider in ("aws", "oci", ""):
            tags = {"managed-by": "llmsafespaces-relay", "inferencerelay-uid": FOREIGN}
            if provider:
                tags["inferencerelay-provider"] = provider
            made.append(
                CloudInstance(
                    instance_id=f"foreign-{n}-{provider or 'none'}",
                    region=region,
                    state="running",
                    public_ip="198.51.100.7",
                    tags=tags,
                    launched_at=NOW - timedelta(days=1),
                )
            )
    for target in ours:
        made.append(
            CloudInstance(
                instance_id=f"foreign-replacing-{target}",
                region=REGIONS["aws"],
                state="running",
                tags={
                    "managed-by": "llmsafespaces-relay",
                    "inferencerelay-uid": FOREIGN,
                    "inferencerelay-provider": "aws",
                    TAG_REPLACES: target,
                },
            )
        )
    return made


def _named(plan: FleetPlan) -> set[str]:
    named = {a.instance_id for a in plan.destroys}
    named |= {str(i.get("id")) for i in plan.instances}
    named |= set(plan.adopted)
    return named


@pytest.mark.parametrize("case", CASES)
def test_another_relays_vms_change_nothing_in_any_plan(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = plan_case(case)
    captured: dict[str, Any] = {}
    real = plan_fleet

    def with_foreign(*args: Any, **kwargs: Any) -> FleetPlan:
        observation: Observation = args[2]
        foreign = _foreign(observation)
        captured["foreign"] = {vm.instance_id for vm in foreign}
        crowded = dataclasses.replace(observation, vms=[*observation.vms, *foreign])
        return real(args[0], args[1], crowded, *args[3:], **kwargs)

    monkeypatch.setattr(plan_cases, "plan_fleet", with_foreign)
    crowded = plan_case(case)
    assert render(crowded) == render(original)
    assert not _named(crowded) & captured["foreign"]


@pytest.mark.parametrize("case", CASES)
def test_no_plan_destroys_a_placeholder(case: str) -> None:
    for destroy in plan_case(case).destroys:
        assert has_real_id({"id": destroy.instance_id, "provider": destroy.provider})


@pytest.mark.parametrize("case", CASES)
def test_a_provider_that_could_not_be_listed_loses_no_vm_to_a_guess(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = plan_fleet

    def blind(*args: Any, **kwargs: Any) -> FleetPlan:
        observation: Observation = args[2]
        unseen = dataclasses.replace(
            observation, vms=(), described={}, unlisted={"aws", "oci", "gcp"}
        )
        return real(args[0], args[1], unseen, *args[3:], **kwargs)

    monkeypatch.setattr(plan_cases, "plan_fleet", blind)
    reasons = {d.reason for d in plan_case(case).destroys}
    assert not reasons & {"gone", "duplicate"}


# -- made-up fleets ---------------------------------------------------------------------------


@st.composite
def fleets(draw: st.DrawFn) -> tuple[RelaySpec, dict[str, Any], Observation, HealthReport]:
    providers = draw(st.lists(st.sampled_from(["aws", "oci"]), min_size=1, max_size=2, unique=True))
    spec = RelaySpec(
        upstream_url="https://u.example",
        providers=tuple(ProviderSpec(p, REGIONS[p], "c") for p in providers),
        replacement_timeout_seconds=600.0,
        max_surge=draw(st.integers(0, 2)),
        min_healthy=draw(st.integers(0, 3)),
    )
    instances: list[dict[str, Any]] = []
    vms: list[CloudInstance] = []
    relays: dict[str, RelayHealth] = {}
    for provider in providers:
        region = REGIONS[provider]
        current = f"{provider}-vm-a"
        roles = [("", current)]
        if draw(st.booleans()):
            roles.append((current, f"{provider}-vm-b"))
        for replaces, vm_id in roles:
            kind = draw(st.sampled_from(["healthy", "unhealthy", "provisioning", "placeholder"]))
            if kind == "placeholder":
                entry_id = f"{provider}-replacement" if replaces else f"{provider}-provisioning"
                entry = {"id": entry_id, "provider": provider, "region": region,
                         "publicIP": "", "state": "provisioning", "healthy": False}  # fmt: skip
            else:
                since = NOW - timedelta(minutes=draw(st.integers(0, 30)))
                stamp = format_time(since)
                entry = {"id": vm_id, "provider": provider, "region": region,
                         "publicIP": "192.0.2.1", "state": kind, "healthy": kind == "healthy",
                         "lastCheck": stamp, "launchedAt": stamp}  # fmt: skip
                if kind == "unhealthy":
                    entry["unhealthySince"] = format_time(since)
                state = draw(st.sampled_from(["running", "running", "terminated", "missing"]))
                if state != "missing":
                    tags = {"managed-by": "llmsafespaces-relay", "inferencerelay-uid": UID,
                            "inferencerelay-provider": provider}  # fmt: skip
                    if replaces:
                        tags[TAG_REPLACES] = replaces
                    vms.append(CloudInstance(vm_id, region, state, "192.0.2.1", tags, since))  # type: ignore[arg-type]
                if draw(st.booleans()):
                    relays[vm_id] = RelayHealth(healthy=draw(st.booleans()))
            if replaces:
                entry["replaces"] = replaces
                entry["tokenKey"] = f"{provider}.2"
            instances.append(entry)
        if draw(st.booleans()):
            vms.append(
                CloudInstance(
                    f"{provider}-foreign", region, "running", "203.0.113.9",
                    {"managed-by": "llmsafespaces-relay", "inferencerelay-uid": FOREIGN,
                     "inferencerelay-provider": provider, TAG_REPLACES: current},
                    NOW - timedelta(hours=3),
                )
            )  # fmt: skip
    observation = Observation(vms=vms, drivers={"aws", "oci"})
    return spec, {"instances": instances}, observation, HealthReport(relays=relays)


def _booting_spares(instances: list[dict[str, Any]]) -> int:
    """Replacement VMs that run and do not serve yet (a placeholder has no VM)."""
    return sum(
        1 for i in instances if i.get("replaces") and has_real_id(i) and not i.get("healthy")
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_every_made_up_fleet_keeps_the_safety_rules(
    fleet: tuple[RelaySpec, dict[str, Any], Observation, HealthReport],
) -> None:
    spec, status, observation, health = fleet
    plan = plan_fleet(spec, status, observation, health, uid=UID, now=NOW)
    foreign = {vm.instance_id for vm in observation.vms if vm.owner_uid != UID}
    assert not _named(plan) & foreign, "another relay's VM was touched"
    for destroy in plan.destroys:
        assert has_real_id({"id": destroy.instance_id, "provider": destroy.provider})
    surges = [a for a in plan.launches if isinstance(a, Launch) and a.replaces]
    if spec.max_surge == 0:
        assert surges == []
    if any(not step.in_place for step in plan.started):
        in_flight = _booting_spares(plan.instances) + len(surges)
        assert in_flight <= spec.max_surge, "a start beyond maxSurge"
    if sum(1 for step in plan.started if step.in_place):
        booting = [i for i in plan.instances if i.get("state") == "provisioning"]
        assert len(plan.started) == 1 and len(booting) == 1, "maxSurge 0: one slot at a time"
    floor = min(spec.min_healthy, len(spec.providers))
    healthy_after = sum(1 for i in plan.instances if i.get("healthy"))
    for destroy in plan.destroys:
        if isinstance(destroy, Destroy) and destroy.promotes:
            report = health.relays.get(destroy.instance_id)
            if report is not None and report.healthy:
                assert healthy_after >= floor, "a healthy VM retired below the minimum"
    for provider in spec.provider_names:
        entries = [i for i in plan.instances if i.get("provider") == provider]
        assert len(entries) <= 2
        assert sum(1 for i in entries if i.get("replaces")) <= 1


def _slot_pair(oci_healthy: bool) -> tuple[dict[str, Any], Observation, HealthReport]:
    """aws: an old VM that recovered and its healthy replacement; oci: one VM."""
    stamp = format_time(NOW - timedelta(minutes=5))
    base: dict[str, Any] = {"publicIP": "192.0.2.1", "lastCheck": stamp, "launchedAt": stamp}
    instances: list[dict[str, Any]] = [
        base | {"id": "i-1", "provider": "aws", "region": REGIONS["aws"], "state": "healthy",
                "healthy": True},
        base | {"id": "i-2", "provider": "aws", "region": REGIONS["aws"], "state": "healthy",
                "healthy": True, "replaces": "i-1", "tokenKey": "aws.2"},
        base | {"id": "o-1", "provider": "oci", "region": REGIONS["oci"], "state": "healthy",
                "healthy": True},
    ]  # fmt: skip
    tags = {"managed-by": "llmsafespaces-relay", "inferencerelay-uid": UID}
    vms = [
        CloudInstance(str(i["id"]), str(i["region"]), "running", "192.0.2.1",
                      tags | {"inferencerelay-provider": str(i["provider"])}, NOW)
        for i in instances
    ]  # fmt: skip
    relays = {"i-1": RelayHealth(True), "i-2": RelayHealth(True), "o-1": RelayHealth(oci_healthy)}
    return (
        {"instances": instances},
        Observation(vms=vms, drivers={"aws", "oci"}),
        HealthReport(relays=relays),
    )


@pytest.mark.parametrize(
    ("min_healthy", "oci_healthy", "retired"),
    [
        (0, False, True),
        (1, False, True),
        (2, False, False),
        (2, True, True),
        (3, True, True),  # capped at the two slots
        (5, False, False),
    ],
)
def test_a_healthy_vm_is_retired_only_while_the_minimum_holds(
    min_healthy: int, oci_healthy: bool, retired: bool
) -> None:
    status, observation, health = _slot_pair(oci_healthy)
    spec = RelaySpec(
        upstream_url="https://u.example",
        providers=(
            ProviderSpec("aws", REGIONS["aws"], "c"),
            ProviderSpec("oci", REGIONS["oci"], "c"),
        ),
        min_healthy=min_healthy,
    )
    plan = plan_fleet(spec, status, observation, health, uid=UID, now=NOW)
    assert [d.instance_id for d in plan.destroys] == (["i-1"] if retired else [])
    ids = [i["id"] for i in plan.instances]
    assert ids == (["i-2", "o-1"] if retired else ["i-1", "i-2", "o-1"])
    if not retired:
        assert "spec.healthCheck.minHealthy" in plan.held[0]
