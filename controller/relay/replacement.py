"""Replacing relay VMs that stopped serving: one at a time within the fleet's surge bound,
never below its healthy minimum. Pure: ``now`` is passed in.

A VM that served and then stays unhealthy for longer than ``spec.healthCheck
.replacementTimeout`` (counted from ``unhealthySince``, with a fresh router report saying so)
gets a replacement:

- ``maxSurge`` > 0: the replacement launches beside it, tagged ``inferencerelay-replaces`` and
  recorded as the slot's second entry (``replaces``), while the old VM stays a router peer: it
  may still come back. Once the router reports the replacement healthy, the old VM is
  destroyed and the replacement takes the slot over. At most ``maxSurge`` replacements are in
  flight (launching or booting) at once; further due ones wait, the longest unhealthy first.
- ``maxSurge`` 0: the unhealthy VM is destroyed first and its slot launches anew, one slot at
  a time: none starts while any slot's VM is still booting.
- The healthy minimum (``minHealthy``, capped at the slot count): a VM the router reports
  healthy (an old VM that recovered while its replacement booted) is retired only if that
  leaves at least this many healthy relays; both VMs then stay, and the healthy replacement no
  longer counts as in flight (each slot runs two VMs at most). The unhealthy VM itself never
  counts, so a replacement never lowers the healthy count while it provisions.

A replacement never healthy within the timeout is destroyed and launched again after the
slot's backoff; one not launched yet is dropped when its old VM recovers; one whose launch
outlived a lost status write is found again by its tag.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from controller.relay.actions import Destroy, FleetPlan, Launch, Observation, Replacing
from controller.relay.drivers.base import CloudInstance
from controller.relay.entries import (
    PROVISIONING,
    placeholder,
    spare_key,
    spare_placeholder,
    taken_over,
    token_key,
    tripped,
    wait_left,
)
from controller.relay.health import HealthReport
from controller.relay.observed import (
    apply_health,
    boot_overdue,
    fill_ip,
    gone,
    observed,
    unhealthy_seconds,
)
from controller.relay.spec import Instance, ProviderSpec, RelaySpec, has_real_id, new_instance
from wspin.core.clock import format_time

TAG_REPLACES: Final = "inferencerelay-replaces"
"""On a replacement VM: the id of the VM it replaces (how a lost launch is found again)."""


@dataclass
class SlotView:
    """One slot while it is planned: its VM (or placeholder) and its replacement, if any."""

    slot: ProviderSpec
    current: Instance | None = None
    spare: Instance | None = None
    frozen: bool = False
    """Status holds more entries for the slot than it can tell apart: no replacement step."""

    @property
    def entries(self) -> list[Instance]:
        return [e for e in (self.current, self.spare) if e is not None]


def review_spare(
    plan: FleetPlan,
    spec: RelaySpec,
    slot: ProviderSpec,
    spare: Instance,
    by_id: Mapping[str, CloudInstance],
    seen: Observation,
    health: HealthReport | None,
    now: datetime,
    *,
    rotate: str,
    reset: bool,
) -> Instance | None:
    """The slot's replacement entry after this pass: kept, due for another launch, or gone."""
    key, replaces = token_key(spare), str(spare.get("replaces") or "")
    if not has_real_id(spare):
        return spare_placeholder(slot, replaces, key) if reset else spare
    region = str(spare.get("region") or slot.region)
    if rotate and spare["id"] == rotate:
        plan.actions.append(
            Destroy(slot.provider, spare["id"], region, "manual", keep=spare, token_key=key)
        )
        plan.drop_tokens.add(key)
        plan.rotated = True
        return None
    vm = observed(spare, by_id, seen, slot.provider, now)
    failures = int(spare.get("launchFailures") or 0) + 1
    listed = vm if isinstance(vm, CloudInstance) else None
    if not gone(vm):
        spare = apply_health(spare, health, now)
        fill_ip(plan, slot.provider, spare, listed, now)
        if health is None or not boot_overdue(spare, listed, spec.replacement_timeout_seconds, now):
            return spare
        why = "not healthy within spec.healthCheck.replacementTimeout"
        plan.actions.append(
            Destroy(
                slot.provider,
                spare["id"],
                region,
                "unhealthy",
                keep=spare,
                blocks=slot.provider,
                token_key=key,
            )
        )
    else:
        why = "stopped before it became healthy"
        if listed is not None and listed.state != "terminated":
            plan.actions.append(
                Destroy(
                    slot.provider,
                    spare["id"],
                    region,
                    "gone",
                    keep=spare,
                    blocks=slot.provider,
                    token_key=key,
                )
            )
    plan.drop_tokens.add(key)
    return spare_placeholder(
        slot,
        replaces,
        key,
        launch_failures=failures,
        error=f"replacement VM {spare['id']} {why}",
        now=now,
    )


def adopt_lost_replacement(
    plan: FleetPlan,
    view: SlotView,
    mine: Sequence[CloudInstance],
    taken: Collection[str],
    health: HealthReport | None,
    now: datetime,
) -> None:
    """A replacement launched whose status write was lost: its tag names the slot's VM, so it
    is taken back as the replacement instead of being destroyed as a duplicate."""
    current = view.current
    if current is None or (view.spare is not None and has_real_id(view.spare)):
        return
    lost = [
        vm
        for vm in mine
        if vm.tags.get(TAG_REPLACES) == current["id"]
        and vm.provider in ("", view.slot.provider)
        and vm.instance_id not in taken
    ]
    if not lost:
        return
    first = min(
        lost, key=lambda vm: (vm.launched_at is None, vm.launched_at or now, vm.instance_id)
    )
    key = token_key(view.spare) if view.spare is not None else spare_key(current)
    entry = new_instance(
        instance_id=first.instance_id,
        provider=view.slot.provider,
        region=first.region,
        public_ip=first.public_ip,
        state=PROVISIONING,
        lastCheck=format_time(now),
        replaces=current["id"],
        tokenKey=key,
    )
    view.spare = apply_health(entry, health, now)
    plan.adopted.append(first.instance_id)


def take_over(plan: FleetPlan, view: SlotView) -> None:
    """The slot's VM is gone and its replacement runs: the replacement is the slot's VM."""
    spare = view.spare
    assert spare is not None
    old = str(spare.get("replaces") or "")
    plan.completed.append(Replacing(view.slot.provider, old, new=str(spare["id"])))
    for index, action in enumerate(plan.actions):
        # A stopped old VM is destroyed this pass: its slot waits for no launch now.
        if isinstance(action, Destroy) and action.instance_id == old and action.blocks:
            plan.actions[index] = dataclasses.replace(action, blocks="", promotes=spare["id"])
    view.current, view.spare = taken_over(spare), None


def plan_replacements(
    plan: FleetPlan,
    spec: RelaySpec,
    views: Sequence[SlotView],
    health: HealthReport | None,
    now: datetime,
    *,
    drivers: Collection[str],
) -> None:
    """Retire VMs whose replacement serves, relaunch replacements after their backoff, and
    start the replacements that are due, within the surge bound and the healthy minimum."""
    floor = min(spec.min_healthy, len(views))
    healthy = sum(1 for view in views for entry in view.entries if entry.get("healthy"))
    views = [view for view in views if not view.frozen]
    for view in views if health is not None else ():  # a VM goes only on a fresh report
        healthy -= _retire(plan, view, healthy, floor)
    in_flight = sum(
        1
        for view in views
        if view.spare is not None and has_real_id(view.spare) and not view.spare.get("healthy")
    )
    for view in views:
        in_flight += _relaunch(plan, spec, view, now, drivers, in_flight)
    booting = bool(plan.launches) or any(
        entry.get("state") == PROVISIONING for view in views for entry in view.entries
    )
    due: list[tuple[float, int, SlotView]] = []
    for index, view in enumerate(views):
        current = view.current
        if view.spare is not None or current is None or not has_real_id(current):
            continue
        seconds = unhealthy_seconds(current, now)
        if seconds is None or health is None:
            continue
        left = spec.replacement_timeout_seconds - seconds
        if left > 0:
            plan.waits.append(left)
        else:
            due.append((-seconds, index, view))
    for _, _, view in sorted(due, key=lambda d: (d[0], d[1])):
        held = _hold(spec, view, in_flight, booting, drivers)
        if held:
            plan.held.append(held)
            continue
        _start(plan, spec, view, now)
        in_flight += 1
        booting = True


def _retire(plan: FleetPlan, view: SlotView, healthy: int, floor: int) -> int:
    """Destroy the VM whose replacement the router reports healthy; returns how many healthy
    relays that takes away (0 or 1)."""
    current, spare = view.current, view.spare
    if (
        current is None
        or spare is None
        or not has_real_id(current)
        or not has_real_id(spare)
        or not spare.get("healthy")
    ):
        return 0
    provider = view.slot.provider
    if current.get("healthy") and healthy - 1 < floor:
        plan.held.append(
            f"{provider} relay {current['id']} recovered and stays until retiring it leaves "
            f"{floor} healthy relay(s) (spec.healthCheck.minHealthy)"
        )
        return 0
    key = token_key(current)
    plan.actions.append(
        Destroy(
            provider,
            current["id"],
            str(current.get("region") or view.slot.region),
            "unhealthy",
            keep=current,
            promotes=spare["id"],
            token_key=key,
        )
    )
    plan.drop_tokens.add(key)
    plan.completed.append(Replacing(provider, current["id"], new=spare["id"]))
    view.current, view.spare = taken_over(spare), None
    return 1 if current.get("healthy") else 0


def _relaunch(
    plan: FleetPlan,
    spec: RelaySpec,
    view: SlotView,
    now: datetime,
    drivers: Collection[str],
    in_flight: int,
) -> int:
    """A replacement not launched yet: dropped when nothing needs replacing any more (or
    ``maxSurge`` became 0: the slot is then replaced in place), launched when its backoff is
    over and the surge bound has room (returns 1), kept otherwise."""
    spare, current = view.spare, view.current
    if spare is None or has_real_id(spare):
        return 0
    if (
        current is None
        or current.get("id") != spare.get("replaces")
        or current.get("healthy")
        or spec.max_surge == 0
    ):
        # Its VM recovered, or left, before a replacement ran (or replacing now happens in
        # place): the token a failed launch stored for it goes too.
        plan.drop_tokens.add(token_key(spare))
        view.spare = None
        return 0
    if tripped(spare) or view.slot.provider not in drivers:
        return 0
    left = wait_left(spare, now)
    if left > 0:
        plan.waits.append(left)
        return 0
    if in_flight >= spec.max_surge:
        plan.held.append(
            f"{view.slot.provider} relay {current['id']} is unhealthy; its replacement waits: "
            f"{in_flight} replacement(s) in flight, spec.healthCheck.maxSurge is {spec.max_surge}"
        )
        return 0
    attempts = int(spare.get("provisioningAttempts") or 0)
    failures = int(spare.get("launchFailures") or 0)
    key, replaces = token_key(spare), str(spare["replaces"])
    plan.actions.append(Launch(view.slot, attempts, failures, replaces=replaces, token_key=key))
    view.spare = spare_placeholder(
        view.slot,
        replaces,
        key,
        attempts=attempts,
        launch_failures=failures,
        error=str(spare.get("lastProvisionError") or ""),
    )
    return 1


def _hold(
    spec: RelaySpec, view: SlotView, in_flight: int, booting: bool, drivers: Collection[str]
) -> str:
    """Why a due replacement waits this pass ("" when it may start)."""
    current = view.current
    assert current is not None
    what = f"{view.slot.provider} relay {current['id']} is unhealthy; its replacement waits"
    if view.slot.provider not in drivers:
        return f"{what}: no driver for provider {view.slot.provider}"
    if spec.max_surge > 0 and in_flight >= spec.max_surge:
        return (
            f"{what}: {in_flight} replacement(s) in flight, "
            f"spec.healthCheck.maxSurge is {spec.max_surge}"
        )
    if spec.max_surge == 0 and (in_flight or booting):
        return f"{what}: with spec.healthCheck.maxSurge 0 one slot is replaced at a time"
    return ""


def _start(plan: FleetPlan, spec: RelaySpec, view: SlotView, now: datetime) -> None:
    current = view.current
    assert current is not None
    slot = view.slot
    seconds = unhealthy_seconds(current, now) or 0.0
    if spec.max_surge > 0:
        key = spare_key(current)
        plan.actions.append(Launch(slot, replaces=current["id"], token_key=key))
        view.spare = spare_placeholder(slot, current["id"], key)
        plan.started.append(Replacing(slot.provider, current["id"], seconds))
        return
    key = token_key(current)
    plan.actions.append(
        Destroy(
            slot.provider,
            current["id"],
            str(current.get("region") or slot.region),
            "unhealthy",
            keep=current,
            blocks=slot.provider,
            token_key=key,
        )
    )
    plan.drop_tokens.add(key)
    launch = Launch(slot, token_key="" if key == slot.provider else key)
    plan.actions.append(launch)
    view.current = placeholder(slot)
    if launch.token_key:
        view.current["tokenKey"] = launch.token_key
    plan.started.append(Replacing(slot.provider, current["id"], seconds, in_place=True))
