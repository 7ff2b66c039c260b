"""The orphan detector: destroy this cluster's relay VMs whose InferenceRelay no longer exists.

A sweep is a sandwich read straight from the API server (never a cache): list the CRs,
list the VMs, list the CRs again, and take the owners from the second CR list. A VM exists
only after its CR did, and a CR cannot vanish without its finalizer destroying its VMs, so
a VM seen in the middle whose owner is missing from the later list is a true orphan.

Only VMs tagged with this cluster's id are considered: another cluster sharing the cloud
account has its own CRs, which this one cannot see, so their VMs would all look orphaned.
A managed VM without a cluster tag (launched by an earlier release) is reported, once per
sweep, as a metric and a log line, and never destroyed automatically: nothing proves which
cluster it belongs to. On top of that a VM must have an owner UID, be pending or running,
and be older than a grace period (cache lag, a CR restored from backup). A VM the cloud
reports no launch time for gets the same grace, counted from the first sweep of this process
that saw it (a restart or a new leader starts it over: the safe direction). At most
``max_deletions`` VMs go per sweep, so a bug cannot empty a cloud in one tick, and every
destroy is logged with the evidence that justified it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from controller.relay.drivers.base import (
    MANAGED_BY_VALUE,
    TAG_MANAGED_BY,
    CloudInstance,
    Driver,
    DriverError,
    truncate,
)
from controller.relay.identity import ClusterIdentity
from controller.relay.listing import list_vms
from controller.relay.metrics import RelayMetrics
from wspin.core.clock import Clock, format_time, utc_now
from wspin.core.errors import KubeAPIError, TransientError
from wspin.core.kinds import INFERENCE_RELAYS, Resource
from wspin.core.logs import fields

log = logging.getLogger(__name__)


class RelayLister(Protocol):
    """Lists InferenceRelays straight from the API server (``wspin.kube.client.Kube``)."""

    async def list(self, res: Resource, namespace: str | None = None) -> dict[str, Any]: ...


@dataclass(frozen=True)
class OrphanPolicy:
    grace_seconds: float = 600.0
    """A VM younger than this (from launch) is never an orphan."""
    max_deletions: int = 10
    """Destroys per sweep; the rest wait for the next sweep."""
    dry_run: bool = False
    """Report what would be destroyed, destroy nothing."""


@dataclass
class SweepResult:
    skipped: str = ""
    """Why the sweep did nothing (a CR list failed); empty when it ran."""
    listed: int = 0
    orphans: list[CloudInstance] = field(default_factory=list)
    destroyed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)
    unclaimed: list[str] = field(default_factory=list)
    """Managed VMs without a cluster tag and without a live owner here: reported only."""


class OrphanDetector:
    def __init__(
        self,
        kube: RelayLister,
        drivers: Mapping[str, Driver],
        metrics: RelayMetrics,
        cluster: ClusterIdentity,
        *,
        policy: OrphanPolicy = OrphanPolicy(),
        regions: Mapping[str, Sequence[str]] | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self.kube = kube
        self.drivers = drivers
        self.metrics = metrics
        self.cluster = cluster
        self.policy = policy
        self.regions = regions or {}
        """provider → regions swept even when no CR names them (``--orphan-regions``), so
        VMs of a CR deleted while the controller was down are found with no CR left."""
        self.clock = clock
        self._first_seen: dict[str, datetime] = {}
        """VM id → when a sweep first saw it live, for VMs without a launch time: their grace
        starts there. Holds only VMs the latest sweep listed live, so it stays bounded."""

    async def sweep(self) -> SweepResult:
        result = SweepResult()
        try:
            cluster = await self.cluster.resolve()
            first = await self._list_relays()
        except (KubeAPIError, TransientError) as err:
            return self._skip(result, f"listing InferenceRelays failed: {err}")
        listing = await list_vms(
            self.drivers, {TAG_MANAGED_BY: MANAGED_BY_VALUE}, self._regions(first)
        )
        for provider, error in listing.failed.items():
            log.warning(
                "orphan sweep: listing VMs failed", extra=fields(provider=provider, error=error)
            )
        listed = listing.vms
        try:
            second = await self._list_relays()
        except KubeAPIError as err:
            return self._skip(result, f"listing InferenceRelays again failed: {err}")
        active = {uid for cr in second if (uid := cr.get("metadata", {}).get("uid"))}
        result.listed = len(listed)
        now = self.clock()
        grace = timedelta(seconds=self.policy.grace_seconds)
        first_seen = {
            vm.instance_id: self._first_seen.get(vm.instance_id, now)
            for _, vm in listed
            if vm.launched_at is None and vm.live
        }
        self._first_seen = first_seen
        for provider, vm in listed:
            if not vm.live or vm.owner_uid in active:
                continue
            if not vm.cluster:
                result.unclaimed.append(vm.instance_id)
                continue
            if vm.cluster != cluster or not vm.owner_uid:
                continue
            age = now - (vm.launched_at or first_seen[vm.instance_id])
            if age < grace:
                continue
            result.orphans.append(vm)
            if len(result.destroyed) + len(result.failed) >= self.policy.max_deletions:
                result.deferred.append(vm.instance_id)
                continue
            await self._destroy(provider, vm, age, len(active), result)
        self._report_unclaimed(result.unclaimed)
        if result.deferred:
            log.warning(
                "orphan sweep hit its deletion limit; the rest waits for the next sweep",
                extra=fields(limit=self.policy.max_deletions, deferred=result.deferred),
            )
        self.metrics.orphan_sweeps.labels(outcome="completed").inc()
        return result

    def _report_unclaimed(self, unclaimed: list[str]) -> None:
        self.metrics.unclaimed.set(len(unclaimed))
        if unclaimed:
            log.warning(
                "relay VMs without a cluster tag whose owner is not an InferenceRelay here; "
                "they may belong to another cluster and are never destroyed automatically",
                extra=fields(instances=sorted(unclaimed), count=len(unclaimed)),
            )

    async def _destroy(
        self,
        provider: str,
        vm: CloudInstance,
        age: timedelta,
        active_count: int,
        result: SweepResult,
    ) -> None:
        evidence = fields(
            provider=provider,
            instance=vm.instance_id,
            region=vm.region,
            owner_uid=vm.owner_uid,
            cluster=vm.cluster,
            state=vm.state,
            launched_at=format_time(vm.launched_at) if vm.launched_at else "unknown",
            age_seconds=int(age.total_seconds()),
            grace_seconds=self.policy.grace_seconds,
            active_relays=active_count,
            dry_run=self.policy.dry_run,
        )
        if self.policy.dry_run:
            log.warning("orphan sweep (dry run): would destroy relay VM", extra=evidence)
            self.metrics.orphans_destroyed.labels(provider=provider, outcome="dry_run").inc()
            result.destroyed.append(vm.instance_id)
            return
        try:
            await self.drivers[provider].destroy(vm.instance_id, vm.region)
        except DriverError as err:
            evidence["fields"]["error"] = truncate(str(err))
            log.warning("orphan sweep: destroying relay VM failed", extra=evidence)
            self.metrics.orphans_destroyed.labels(provider=provider, outcome="failed").inc()
            result.failed.append(vm.instance_id)
            return
        log.warning("orphan sweep destroyed relay VM whose InferenceRelay is gone", extra=evidence)
        self.metrics.orphans_destroyed.labels(provider=provider, outcome="destroyed").inc()
        result.destroyed.append(vm.instance_id)

    async def _list_relays(self) -> list[dict[str, Any]]:
        listing = await self.kube.list(INFERENCE_RELAYS)
        items: list[dict[str, Any]] = listing.get("items") or []
        return items

    def _regions(self, relays: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
        pairs: set[tuple[str, str]] = set()
        for cr in relays:
            for entry in (cr.get("spec") or {}).get("providers") or []:
                pairs.add((str(entry.get("provider", "")), str(entry.get("region", ""))))
            for instance in (cr.get("status") or {}).get("instances") or []:
                pairs.add((str(instance.get("provider", "")), str(instance.get("region", ""))))
        for provider, regions in self.regions.items():
            pairs.update((provider, region) for region in regions)
        swept: dict[str, list[str]] = {}
        for provider, region in sorted(pairs):
            if provider in self.drivers and region:
                swept.setdefault(provider, []).append(region)
        return swept

    def _skip(self, result: SweepResult, why: str) -> SweepResult:
        log.warning("orphan sweep skipped", extra=fields(reason=why))
        self.metrics.orphan_sweeps.labels(outcome="skipped").inc()
        result.skipped = why
        return result
