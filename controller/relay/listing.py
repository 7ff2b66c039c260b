"""Finding relay VMs: where a fleet's VMs may run, and one listing over every driver.

The fleet pass, the deletion sweep and the orphan sweep all list VMs by tags, per provider,
over a set of regions. ``list_vms`` is that loop, once: a provider without a driver is
skipped (there is nothing to ask), and a listing that fails is reported per provider, never
raised, so each caller decides what a blind spot means for it (the fleet pass decides
nothing about that provider's VMs, deletion keeps its finalizer, the orphan sweep leaves the
provider alone this time).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from controller.relay.drivers.base import CloudInstance, Driver, DriverError, truncate
from controller.relay.spec import RelaySpec
from controller.types import Obj


@dataclass
class Listing:
    """What one listing over several providers found."""

    vms: list[tuple[str, CloudInstance]] = field(default_factory=list)
    """(provider whose driver listed it, VM), in provider then driver order."""
    failed: dict[str, str] = field(default_factory=dict)
    """provider → why its listing failed (cut to the length a log line or status keeps)."""


def fleet_regions(spec: RelaySpec | None, status: Obj) -> dict[str, list[str]]:
    """provider → the regions its VMs may run in: the spec's and those status records (a
    region change leaves the old VM where it was)."""
    pairs = {(p.provider, p.region) for p in (spec.providers if spec else ())}
    pairs |= {
        (str(i.get("provider") or ""), str(i.get("region") or ""))
        for i in status.get("instances") or []
    }
    regions: dict[str, list[str]] = {}
    for provider, region in sorted(pairs):
        if provider and region:
            regions.setdefault(provider, []).append(region)
    return regions


async def list_vms(
    drivers: Mapping[str, Driver],
    tags: Mapping[str, str],
    regions: Mapping[str, Sequence[str]],
) -> Listing:
    """Every managed VM carrying ``tags`` in ``regions`` (provider → regions)."""
    listing = Listing()
    for provider, where in regions.items():
        driver = drivers.get(provider)
        if driver is None or not where:
            continue
        try:
            found = await driver.list(tags, list(where))
        except DriverError as err:
            listing.failed[provider] = truncate(str(err))
            continue
        listing.vms.extend((provider, vm) for vm in found)
    return listing
