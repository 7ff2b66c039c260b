"""``plan_fleet``: what one pass over an InferenceRelay should do, decided from what it observed.

Pure: no I/O, no clock (``now`` is passed in). The inputs are the parsed spec, the current
status, the VMs the cloud lists under this CR's UID, and the router's health report; the
output is the list of actions to execute and the status entries they lead to. Executing the
actions and writing the status is the reconciler's job (``reconciler``); so is the requeue the
plan asks for, which is the only delay anywhere in the relay: the work queue waits, nothing
sleeps.

Per spec provider (a *slot*), in order:
- a VM status names and the cloud still runs is kept: health applied, the public IP filled in,
  replaced (destroy, then a fresh token and a launch) when it is not healthy within
  ``replacementTimeout``;
- a VM that is gone (terminated outside the controller, or unknown to the cloud) is replaced;
- an empty slot adopts a tagged VM status does not know (a launch whose status write was lost),
  otherwise it launches, unless its breaker tripped (``provisioningAttempts`` configuration
  errors in a row, cleared by a spec change) or its backoff (``lastCheck`` plus 30 s doubling)
  has not passed;
- further tagged VMs for a slot that has one are duplicates, and are destroyed.
VMs of providers no longer in the spec are destroyed; a manual rotation destroys the VM the
annotation names and leaves its slot empty until the next pass.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from controller.relay.drivers.base import CloudInstance
from controller.relay.entries import (
    FAILED,
    PROVISIONING,
    failure_entry,
    placeholder,
    retry_entry,
)
from controller.relay.health import HealthReport
from controller.relay.spec import (
    Instance,
    ProviderSpec,
    RelaySpec,
    has_real_id,
    new_instance,
)
from controller.toolkit.conditions import find_condition
from controller.types import Obj
from wspin.core.clock import format_time, parse_time

REQUEUE_PROVISIONING: Final = 10.0
REQUEUE_DEGRADED: Final = 15.0
REQUEUE_HEALTHY: Final = 30.0
REQUEUE_PAUSED: Final = 300.0

BREAKER_THRESHOLD: Final = 3
"""Configuration errors in a row after which a slot waits for a spec change."""
BACKOFF_BASE: Final = 30.0
BACKOFF_MAX: Final = 600.0

VISIBILITY_GRACE: Final = 300.0
"""Seconds after a launch during which a VM the cloud does not know yet is waited for: both
clouds' APIs are eventually consistent, and declaring a fresh VM gone would launch a second."""

_FROZEN_STATES: Final = frozenset({"draining", "terminated", "quota-exhausted", FAILED})


@dataclass(frozen=True)
class Launch:
    """Launch the slot's VM (the executor ensures its token is stored first)."""

    slot: ProviderSpec
    attempts: int = 0
    """Configuration errors so far (carried into the failure placeholder)."""
    launch_failures: int = 0
    """Retryable failures so far (the backoff exponent)."""


@dataclass(frozen=True)
class Destroy:
    provider: str
    instance_id: str
    region: str
    reason: str
    """Why, for the log line and the rotation metric: ``provider removed``, ``duplicate``,
    ``gone``, ``unhealthy``, ``manual``."""
    keep: Instance | None = None
    """The status entry to keep when the destroy fails (retried next pass, never leaked)."""
    blocks: str = ""
    """The provider whose launch waits for this destroy (a replacement)."""


@dataclass(frozen=True)
class Observation:
    """What one pass saw: the VMs listed under the CR's UID, and what it could not see."""

    vms: Sequence[CloudInstance] = ()
    unlisted: Collection[str] = ()
    """Providers whose listing failed: nothing is decided about their VMs."""
    described: Mapping[str, CloudInstance | None] = field(default_factory=dict)
    """Status VMs the listing left out, asked of the cloud one by one (None: not found)."""
    unknown: Collection[str] = ()
    """Status VMs whose describe failed: nothing is decided about them."""
    destroyed: Container[str] = ()
    """VMs this controller destroyed lately (a lagging listing may still show them)."""
    drivers: Collection[str] = ()
    """Providers this controller has a driver for."""


@dataclass
class FleetPlan:
    actions: list[Launch | Destroy] = field(default_factory=list)
    instances: list[Instance] = field(default_factory=list)
    """The status entries, in spec order, then kept entries of removed providers."""
    drop_tokens: set[str] = field(default_factory=set)
    """Providers whose VM token goes (its VM is replaced or rotated)."""
    rotated: bool = False
    waits: list[float] = field(default_factory=list)
    """Seconds until a backoff ends."""
    provisioned: list[tuple[str, float]] = field(default_factory=list)
    """(provider, seconds from launch to running with an IP) for VMs that just got there."""
    adopted: list[str] = field(default_factory=list)
    died: dict[str, Instance] = field(default_factory=dict)
    """provider → the backoff placeholder of a slot whose new VM died before serving."""
    replaced: list[str] = field(default_factory=list)
    """Providers whose VM disappeared on its own (counted as a ``gone`` rotation)."""

    @property
    def launches(self) -> list[Launch]:
        return [a for a in self.actions if isinstance(a, Launch)]

    @property
    def destroys(self) -> list[Destroy]:
        return [a for a in self.actions if isinstance(a, Destroy)]


def backoff_seconds(failures: int) -> float:
    """Delay before retry number ``failures + 1``: 30 s doubling, capped at 10 minutes."""
    if failures <= 0:
        return 0.0
    return float(min(BACKOFF_MAX, BACKOFF_BASE * 2 ** (failures - 1)))


def transition(state: str, healthy: bool) -> str:
    """The next instance state given what the router reports.

    A booting VM (``""`` or ``provisioning``) never drops to ``unhealthy``: the router needs two
    good probes before it calls a new relay healthy. States the controller does not drive are
    left alone.
    """
    if state in _FROZEN_STATES:
        return state
    if healthy:
        return "healthy"
    if state in ("", PROVISIONING):
        return state
    return "unhealthy"


def spec_changed(status: Obj, generation: int | None) -> bool:
    """The spec changed since the breaker last spoke: failures counted before no longer count."""
    breaker = find_condition(status.get("conditions") or [], "ProvisioningFailed")
    return bool(breaker and breaker.get("observedGeneration") not in (None, generation))


def plan_fleet(
    spec: RelaySpec,
    status: Obj,
    seen: Observation,
    health: HealthReport | None,
    *,
    uid: str,
    now: datetime,
    generation: int | None = None,
    rotate: str = "",
) -> FleetPlan:
    plan = FleetPlan()
    old: list[Instance] = [dict(i) for i in status.get("instances") or []]
    reset = spec_changed(status, generation)
    by_id = {vm.instance_id: vm for vm in seen.vms}
    known = {str(i.get("id")) for i in old if has_real_id(i)}
    mine = [
        vm
        for vm in seen.vms
        if vm.owner_uid == uid and vm.live and vm.instance_id not in seen.destroyed
    ]
    _retire_removed(plan, spec, old, mine, seen)
    for slot in spec.providers:
        entry = next((i for i in old if i.get("provider") == slot.provider), None)
        replacing = False
        if entry is not None and has_real_id(entry):
            vm = _observed(entry, by_id, seen, slot)
            if rotate and entry["id"] == rotate:
                _rotate(plan, slot, entry)
                continue
            entry = _keep(plan, spec, slot, entry, vm, health, now)
            replacing = entry is None
        if entry is not None and has_real_id(entry):
            plan.instances.append(entry)
            _destroy_duplicates(plan, slot, mine, known | {entry["id"]}, seen)
            continue
        # A slot whose VM is being replaced launches anew: a VM the listing still shows
        # for it is the one being destroyed, or a duplicate of it.
        skip = replacing or slot.provider in seen.unlisted
        candidates = [] if skip else _candidates(slot, mine, known)
        if candidates:
            first, *rest = sorted(
                candidates,
                key=lambda vm: (vm.launched_at is None, vm.launched_at or now, vm.instance_id),
            )
            plan.instances.append(_apply_health(_adopted(slot, first, now), first, health, now))
            plan.adopted.append(first.instance_id)
            for vm in rest:
                plan.actions.append(Destroy(slot.provider, vm.instance_id, vm.region, "duplicate"))
            continue
        previous = plan.died.get(slot.provider, entry)
        _fill(plan, slot, None if reset else previous, seen, now)
    return plan


def _observed(
    entry: Instance, by_id: Mapping[str, CloudInstance], seen: Observation, slot: ProviderSpec
) -> CloudInstance | str | None:
    """The slot VM as observed: the listing's view, else the describe's; ``"unknown"`` when
    nothing could be seen (the listing failed): nothing is decided then."""
    listed = by_id.get(entry["id"])
    if listed is not None:
        return listed
    if entry["id"] in seen.described:
        return seen.described[entry["id"]]
    if slot.provider in seen.unlisted or entry["id"] in seen.unknown:
        return "unknown"
    return None


def _keep(
    plan: FleetPlan,
    spec: RelaySpec,
    slot: ProviderSpec,
    entry: Instance,
    vm: CloudInstance | str | None,
    health: HealthReport | None,
    now: datetime,
) -> Instance | None:
    """The slot's VM entry after this pass, or None when it is gone or being replaced."""
    region = str(entry.get("region") or slot.region)
    launched = parse_time(entry.get("launchedAt"))
    if vm is None and launched is not None and (now - launched).total_seconds() < VISIBILITY_GRACE:
        vm = "unknown"
    if vm is None or (isinstance(vm, CloudInstance) and not vm.live):
        if isinstance(vm, CloudInstance) and vm.state != "terminated":
            # A stopped VM still costs money: destroyed before its replacement launches.
            plan.actions.append(
                Destroy(
                    slot.provider, entry["id"], region, "gone", keep=entry, blocks=slot.provider
                )
            )
        else:
            plan.replaced.append(slot.provider)
        plan.drop_tokens.add(slot.provider)
        if entry.get("state") == PROVISIONING and launched is not None:
            # Died before it ever served: a boot that keeps failing must back off, not
            # launch a VM every pass.
            failures = int(entry.get("launchFailures") or 0) + 1
            plan.died[slot.provider] = retry_entry(
                slot, 0, failures, f"VM {entry['id']} stopped before it became healthy", now
            )
        return None
    listed = vm if isinstance(vm, CloudInstance) else None
    entry = _apply_health(entry, listed, health, now)
    if listed is not None and listed.public_ip and not entry.get("publicIP"):
        entry["publicIP"] = listed.public_ip
        launched = parse_time(entry.get("launchedAt"))
        if launched is not None:  # launched by this controller: time it once, now it serves
            plan.provisioned.append((slot.provider, max((now - launched).total_seconds(), 0.0)))
    if health is None or entry["state"] != PROVISIONING:
        return entry
    # The clock starts when the VM was both launched and published to the router (the
    # first lastCheck): a VM adopted long after its launch gets the whole timeout too.
    starts = [
        t
        for t in (listed.launched_at if listed else None, parse_time(entry.get("lastCheck")))
        if t is not None
    ]
    overdue = bool(starts) and now - max(starts) >= timedelta(
        seconds=spec.replacement_timeout_seconds
    )
    if overdue:
        plan.actions.append(
            Destroy(
                slot.provider, entry["id"], region, "unhealthy", keep=entry, blocks=slot.provider
            )
        )
        plan.drop_tokens.add(slot.provider)
        return None
    return entry


def _apply_health(
    entry: Instance, vm: CloudInstance | None, health: HealthReport | None, now: datetime
) -> Instance:
    if not entry.get("lastCheck"):
        entry["lastCheck"] = format_time(now)
    if health is None:
        return entry
    relay = health.relays.get(entry["id"])
    healthy = relay is not None and relay.healthy
    if relay is not None:
        entry["429Count"] = relay.count_429
        entry["totalRequests"] = relay.requests_total
        entry["egressBytes"] = relay.egress_bytes
    entry["healthy"] = healthy
    entry["state"] = transition(str(entry.get("state") or ""), healthy)
    if healthy:
        entry.pop("launchFailures", None)  # it serves: the boot backoff starts over
    return entry


def _rotate(plan: FleetPlan, slot: ProviderSpec, entry: Instance) -> None:
    region = str(entry.get("region") or slot.region)
    plan.actions.append(Destroy(slot.provider, entry["id"], region, "manual", keep=entry))
    plan.drop_tokens.add(slot.provider)
    plan.rotated = True


def _candidates(
    slot: ProviderSpec, mine: Sequence[CloudInstance], known: Collection[str]
) -> list[CloudInstance]:
    """Live VMs of this CR tagged for the slot (or with no provider tag: older releases) in
    the slot's region, that no other status entry holds."""
    return [
        vm
        for vm in mine
        if vm.provider in ("", slot.provider)
        and vm.region == slot.region
        and vm.instance_id not in known
    ]


def _destroy_duplicates(
    plan: FleetPlan,
    slot: ProviderSpec,
    mine: Sequence[CloudInstance],
    known: Collection[str],
    seen: Observation,
) -> None:
    if slot.provider in seen.unlisted:
        return
    for vm in _candidates(slot, mine, known):
        plan.actions.append(Destroy(slot.provider, vm.instance_id, vm.region, "duplicate"))


def _adopted(slot: ProviderSpec, vm: CloudInstance, now: datetime) -> Instance:
    return new_instance(
        instance_id=vm.instance_id,
        provider=slot.provider,
        region=vm.region,
        public_ip=vm.public_ip,
        state=PROVISIONING,
        lastCheck=format_time(now),
    )


def _fill(
    plan: FleetPlan, slot: ProviderSpec, previous: Instance | None, seen: Observation, now: datetime
) -> None:
    """An empty slot: wait for its breaker or backoff, or launch."""
    attempts = int((previous or {}).get("provisioningAttempts") or 0)
    failures = int((previous or {}).get("launchFailures") or 0)
    if previous is not None and previous.get("state") == FAILED and attempts >= BREAKER_THRESHOLD:
        plan.instances.append(previous)  # tripped: waits for a spec change
        return
    if previous is not None and (attempts or failures):
        last = parse_time(previous.get("lastCheck")) or now
        due = last + timedelta(seconds=backoff_seconds(max(attempts, failures)))
        if due > now:
            plan.waits.append((due - now).total_seconds())
            plan.instances.append(previous)
            return
    if slot.provider not in seen.drivers:
        drivers = ", ".join(sorted(seen.drivers)) or "none"
        plan.instances.append(
            failure_entry(
                slot,
                attempts + 1,
                f"no driver for provider {slot.provider}; this controller runs: {drivers}",
                now,
            )
        )
        return
    plan.instances.append(
        placeholder(
            slot,
            attempts=attempts,
            launch_failures=failures,
            error=str((previous or {}).get("lastProvisionError") or ""),
        )
    )
    plan.actions.append(Launch(slot, attempts, failures))


def _retire_removed(
    plan: FleetPlan,
    spec: RelaySpec,
    old: Sequence[Instance],
    mine: Sequence[CloudInstance],
    seen: Observation,
) -> None:
    """Destroy VMs of providers no longer in the spec; an entry whose destroy fails is kept
    (the executor puts ``keep`` back), so it is retried, never leaked."""
    names = set(spec.provider_names)
    planned: set[str] = set()
    for entry in old:
        provider = str(entry.get("provider") or "")
        if provider in names or not has_real_id(entry) or entry.get("state") == "terminated":
            continue  # placeholders never reach destroy
        plan.actions.append(
            Destroy(
                provider,
                entry["id"],
                str(entry.get("region") or ""),
                "provider removed",
                keep=entry,
            )
        )
        planned.add(entry["id"])
    for vm in mine:
        if (
            vm.provider
            and vm.provider not in names
            and vm.instance_id not in planned
            and vm.provider not in seen.unlisted
        ):
            plan.actions.append(Destroy(vm.provider, vm.instance_id, vm.region, "provider removed"))
