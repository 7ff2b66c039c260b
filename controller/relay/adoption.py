"""Adoption: match VMs the cloud lists under this CR's UID with the status. Pure: no I/O.

A launch whose status write was lost (a crash, a 409) leaves a tagged VM that status does
not know. Adopting it, instead of launching another, is what keeps a crash from leaking a
VM. Any further tagged VM for a slot that already has one is a duplicate to destroy.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from controller.relay.drivers.base import CloudInstance
from controller.relay.spec import Instance, RelaySpec, new_instance
from controller.toolkit.clock import format_time


@dataclass
class AdoptionPlan:
    adopted: dict[str, Instance] = field(default_factory=dict)
    """provider → synthetic status entry for a VM adopted into an empty slot."""
    duplicates: list[tuple[str, CloudInstance]] = field(default_factory=list)
    """(provider, VM) to destroy: tagged for this CR and slot, but not the slot's VM."""


def plan_adoption(
    *,
    uid: str,
    spec: RelaySpec,
    mapped: Mapping[str, Instance],
    known_ids: Collection[str],
    listings: Mapping[str, Sequence[CloudInstance] | None],
    skip: Collection[str] = (),
    destroyed: Container[str] = (),
    now: datetime,
) -> AdoptionPlan:
    """Decide adoptions and duplicates; refreshes an empty ``publicIP`` in ``mapped`` in place.

    ``listings`` maps provider → VMs in its spec region (None when the listing failed: nothing
    is decided for that provider). Providers in ``skip`` have a launch in flight, whose VM is
    neither adopted nor a duplicate. VMs of another UID and VMs not pending or running are
    never touched. A VM with a UID tag but no provider tag (older releases) still counts.
    """
    plan = AdoptionPlan()
    if not uid:
        return plan
    for slot in spec.providers:
        listing = listings.get(slot.provider)
        if listing is None or slot.provider in skip:
            continue
        candidates = [
            vm
            for vm in listing
            if vm.owner_uid == uid
            and vm.provider in ("", slot.provider)
            and vm.live
            and vm.instance_id not in destroyed
        ]
        existing = mapped.get(slot.provider)
        if existing is not None:
            if not existing.get("publicIP"):
                same = next((vm for vm in candidates if vm.instance_id == existing["id"]), None)
                if same is not None and same.public_ip:
                    existing["publicIP"] = same.public_ip
        elif candidates:
            first = candidates.pop(0)
            plan.adopted[slot.provider] = new_instance(
                instance_id=first.instance_id,
                provider=slot.provider,
                region=slot.region,
                public_ip=first.public_ip,
                state="provisioning",
                lastCheck=format_time(now),
            )
            known = {*known_ids, first.instance_id}
            plan.duplicates.extend(
                (slot.provider, vm) for vm in candidates if vm.instance_id not in known
            )
            continue
        plan.duplicates.extend(
            (slot.provider, vm) for vm in candidates if vm.instance_id not in known_ids
        )
    return plan
