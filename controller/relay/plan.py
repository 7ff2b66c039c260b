"""``plan_fleet``: what one pass over an InferenceRelay should do, decided from what it observed.

Pure: no I/O, no clock (``now`` is passed in). The inputs are the parsed spec, the current
status, the VMs the cloud lists under this CR's UID, and the router's health report; the
output is the list of actions to execute and the status entries they lead to. Executing the
actions and writing the status is the reconciler's job (``reconciler``); so is the requeue the
plan asks for, which is the only delay anywhere in the relay: the work queue waits, nothing
sleeps.

Per spec provider (a *slot*), in order:
- a VM status names and the cloud still runs is kept, health applied and the public IP
  filled in; one still booting (never healthy) after ``replacementTimeout`` is destroyed
  and launched anew in place: it never served;
- a VM that is gone (terminated outside the controller, or unknown to the cloud) is
  replaced, by its replacement when one is under way;
- a VM unhealthy for longer than ``replacementTimeout`` after it served gets a replacement,
  under the fleet's surge bound and healthy minimum (``replacement``);
- an empty slot adopts a tagged VM status does not know (a launch whose status write was lost),
  otherwise it launches, unless its breaker tripped (``provisioningAttempts`` configuration
  errors in a row, cleared by a spec change) or its backoff (``lastCheck`` plus 30 s doubling)
  has not passed;
- further tagged VMs for a slot that has one are duplicates, and are destroyed.
VMs of providers no longer in the spec are destroyed; a manual rotation destroys the VM the
annotation names and leaves its slot empty until the next pass. Only VMs tagged with this
CR's UID are ever adopted or destroyed: another relay's VMs are never touched.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Final

from controller.relay.actions import Destroy, FleetPlan, Launch, Observation
from controller.relay.drivers.base import CloudInstance
from controller.relay.entries import (
    PROVISIONING,
    failure_entry,
    placeholder,
    retry_entry,
    token_key,
    tripped,
    wait_left,
)
from controller.relay.health import HealthReport
from controller.relay.observed import apply_health, boot_overdue, fill_ip, gone, observed
from controller.relay.replacement import (
    SlotView,
    adopt_lost_replacement,
    plan_replacements,
    review_spare,
    take_over,
)
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
    """The actions one pass takes and the status entries they lead to (see the module)."""
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
    views: list[SlotView] = []
    extras: list[Instance] = []
    for slot in spec.providers:
        view = SlotView(slot)
        views.append(view)
        mine_of_slot = [i for i in old if i.get("provider") == slot.provider]
        entry = next((i for i in mine_of_slot if not i.get("replaces")), None)
        spare = next((i for i in mine_of_slot if i.get("replaces")), None)
        # More entries than a slot has (a CRD that pruned ``replaces``): kept as they are,
        # so no VM drops out of status unseen (deletion still destroys them), and the slot
        # starts no replacement while it cannot tell its VMs apart.
        unknown = [i for i in mine_of_slot if i is not entry and i is not spare and has_real_id(i)]
        extras += unknown
        view.frozen = bool(unknown)
        if unknown:
            plan.held.append(
                f"{len(mine_of_slot)} status entries for {slot.provider} cannot be told apart "
                "(is the InferenceRelay CRD older than the controller? apply charts/wspin/crds/)"
            )
        if spare is not None:
            view.spare = review_spare(
                plan, spec, slot, spare, by_id, seen, health, now, rotate=rotate, reset=reset
            )
        replacing = False
        if entry is not None and has_real_id(entry):
            if rotate and entry["id"] == rotate:
                _rotate(plan, slot, entry)
                if view.spare is not None and not has_real_id(view.spare):
                    plan.drop_tokens.add(token_key(view.spare))
                    view.spare = None  # nothing left for it to replace
                continue
            vm = observed(entry, by_id, seen, slot.provider, now)
            entry = _keep(plan, spec, slot, entry, vm, health, now)
            replacing = entry is None
        if entry is not None and has_real_id(entry):
            view.current = entry
            taken = known | {entry["id"]}
            if view.spare is not None:
                taken.add(str(view.spare["id"]))
            if slot.provider not in seen.unlisted:
                adopt_lost_replacement(plan, view, mine, taken, health, now)
                if view.spare is not None:
                    taken.add(str(view.spare["id"]))
            _destroy_duplicates(plan, slot, mine, taken, seen)
            continue
        if view.spare is not None and has_real_id(view.spare):
            take_over(plan, view)  # the VM it replaced is gone: it is the slot's VM now
            continue
        if view.spare is not None:  # a replacement not launched yet has nothing to replace
            plan.drop_tokens.add(token_key(view.spare))
            view.spare = None
        # A slot whose VM is being replaced launches anew: a VM the listing still shows
        # for it is the one being destroyed, or a duplicate of it.
        skip = replacing or slot.provider in seen.unlisted
        candidates = [] if skip else _candidates(slot, mine, known)
        if candidates:
            first, *rest = sorted(
                candidates,
                key=lambda vm: (vm.launched_at is None, vm.launched_at or now, vm.instance_id),
            )
            view.current = apply_health(_adopted(slot, first, now), health, now)
            plan.adopted.append(first.instance_id)
            for vm in rest:
                plan.actions.append(Destroy(slot.provider, vm.instance_id, vm.region, "duplicate"))
            continue
        previous = plan.died.get(slot.provider, entry)
        view.current = _fill(plan, slot, None if reset else previous, seen, now)
    plan_replacements(plan, spec, views, health, now, drivers=seen.drivers)
    for view in views:
        plan.instances.extend(view.entries)
    plan.instances.extend(extras)
    return plan


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
    key = token_key(entry)
    if gone(vm):
        if isinstance(vm, CloudInstance) and vm.state != "terminated":
            # A stopped VM still costs money: destroyed before its replacement launches.
            plan.actions.append(
                Destroy(
                    slot.provider,
                    entry["id"],
                    region,
                    "gone",
                    keep=entry,
                    blocks=slot.provider,
                    token_key=key,
                )
            )
        else:
            plan.replaced.append(slot.provider)
        plan.drop_tokens.add(key)
        launched = parse_time(entry.get("launchedAt"))
        if entry.get("state") == PROVISIONING and launched is not None:
            # Died before it ever served: a boot that keeps failing must back off, not
            # launch a VM every pass.
            failures = int(entry.get("launchFailures") or 0) + 1
            plan.died[slot.provider] = retry_entry(
                slot, 0, failures, f"VM {entry['id']} stopped before it became healthy", now
            )
        return None
    listed = vm if isinstance(vm, CloudInstance) else None
    entry = apply_health(entry, health, now)
    fill_ip(plan, slot.provider, entry, listed, now)
    if health is None or not boot_overdue(entry, listed, spec.replacement_timeout_seconds, now):
        return entry
    plan.actions.append(
        Destroy(
            slot.provider,
            entry["id"],
            region,
            "unhealthy",
            keep=entry,
            blocks=slot.provider,
            token_key=key,
        )
    )
    plan.drop_tokens.add(key)
    return None


def _rotate(plan: FleetPlan, slot: ProviderSpec, entry: Instance) -> None:
    region = str(entry.get("region") or slot.region)
    key = token_key(entry)
    plan.actions.append(
        Destroy(slot.provider, entry["id"], region, "manual", keep=entry, token_key=key)
    )
    plan.drop_tokens.add(key)
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
) -> Instance:
    """An empty slot: wait for its breaker or backoff, or launch."""
    attempts = int((previous or {}).get("provisioningAttempts") or 0)
    failures = int((previous or {}).get("launchFailures") or 0)
    if previous is not None and tripped(previous):
        return previous  # tripped: waits for a spec change
    if previous is not None:
        left = wait_left(previous, now)
        if left > 0:
            plan.waits.append(left)
            return previous
    if slot.provider not in seen.drivers:
        drivers = ", ".join(sorted(seen.drivers)) or "none"
        return failure_entry(
            slot,
            attempts + 1,
            f"no driver for provider {slot.provider}; this controller runs: {drivers}",
            now,
        )
    key = token_key(previous) if previous is not None else slot.provider
    action = Launch(slot, attempts, failures, token_key="" if key == slot.provider else key)
    plan.actions.append(action)
    entry = placeholder(
        slot,
        attempts=attempts,
        launch_failures=failures,
        error=str((previous or {}).get("lastProvisionError") or ""),
    )
    if action.token_key:
        entry["tokenKey"] = action.token_key
    return entry


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
