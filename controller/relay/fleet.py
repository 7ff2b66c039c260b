"""The fleet pass: bring one InferenceRelay's VMs to one per spec provider, and report status.

Order matters and follows the reference: scrape health, retire providers removed from the
spec, adopt tagged VMs status does not know, then walk the spec's providers (keep, replace
or launch), destroy duplicates, and finally publish peers and status. Decisions are the pure
functions in ``decisions`` and ``adoption``; this module does the I/O around them.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from controller.relay import decisions
from controller.relay.adoption import plan_adoption
from controller.relay.decisions import BREAKER_THRESHOLD
from controller.relay.deps import RelayDeps
from controller.relay.drivers.base import LIVE_STATES, truncate
from controller.relay.health import HealthReport
from controller.relay.launches import LaunchKey
from controller.relay.passstate import (
    FleetPass,
    RetryBook,
    destroy_vm,
    drop_token,
    save_tokens,
)
from controller.relay.peers import peer_entries, sync_peers
from controller.relay.slots import fill_slot
from controller.relay.spec import (
    Condition,
    Instance,
    ProviderSpec,
    RelaySpec,
    has_real_id,
)
from controller.relay.tokens import read_tokens
from controller.toolkit.clock import format_time, parse_time
from controller.types import Requeue
from wspin.logs import fields

log = logging.getLogger(__name__)


async def fleet_pass(
    deps: RelayDeps, cr: dict[str, Any], spec: RelaySpec, retries: RetryBook
) -> Requeue:
    """Run one pass over ``cr`` (a private copy): rewrites its status in place, syncs peers and
    tokens, and returns when to come back. The caller writes the status if it changed."""
    meta = cr.get("metadata", {})
    status = cr.setdefault("status", {})
    conditions: list[Condition] = list(status.get("conditions") or [])
    generation = meta.get("generation")
    breaker = decisions.find_condition(conditions, "ProvisioningFailed")
    p = FleetPass(
        deps=deps,
        cr=cr,
        spec=spec,
        retries=retries,
        now=deps.clock(),
        uid=str(meta.get("uid") or ""),
        old=[dict(i) for i in status.get("instances") or []],
        spec_changed=bool(breaker and breaker.get("observedGeneration") not in (None, generation)),
    )
    if p.spec_changed:
        retries.reset(p.uid)
    p.report = await _scrape(deps)
    kept_removed = await _retire_removed_providers(p)
    mapped = {
        i["provider"]: i
        for i in p.old
        if i.get("provider") in spec.provider_names
        and i.get("state") != "provisioning-failed"
        and has_real_id(i)
    }
    await _list(p)
    plan = plan_adoption(
        uid=p.uid,
        spec=spec,
        mapped=mapped,
        known_ids={str(i.get("id")) for i in p.old if i.get("id")},
        listings=p.listings,
        skip=deps.launches.in_flight(p.uid),
        destroyed=deps.destroyed,
        now=p.now,
    )
    for provider, adopted in plan.adopted.items():
        log.info(
            "adopted a tagged relay VM missing from status",
            extra=fields(relay=meta.get("name"), provider=provider, instance=adopted["id"]),
        )
    mapped.update(plan.adopted)
    p.tokens = await read_tokens(deps.kube, deps.namespace)

    instances: list[Instance] = []
    for slot in spec.providers:
        entry = mapped.get(slot.provider)
        if entry is not None:
            entry = await _keep_or_replace(p, slot, entry)
        if entry is None:
            entry = await fill_slot(p, slot)
        if entry is not None:
            instances.append(entry)
    for provider, vm in plan.duplicates:
        await destroy_vm(p, provider, vm.instance_id, vm.region, "duplicate VM for one slot")
    await _retire_removed_launches(p)
    if p.tokens_dirty:
        await save_tokens(p)

    instances.extend(kept_removed)
    healthy = sum(1 for i in instances if i.get("healthy"))
    deps.metrics.record_fleet(instances, healthy)
    try:
        await sync_peers(deps.kube, deps.namespace, peer_entries(instances, p.tokens))
    except Exception as err:  # the router keeps its last list; status still gets written
        log.warning("cannot sync relay-router peers", extra=fields(error=str(err)))

    _set_conditions(p, conditions, instances, healthy, generation)
    status["instances"] = instances
    status["healthyReplicas"] = healthy
    status["conditions"] = conditions
    seconds = decisions.requeue_seconds(busy=p.busy, healthy=healthy, total=len(instances))
    return Requeue(after=min([seconds, *p.waits]))


async def _scrape(deps: RelayDeps) -> HealthReport | None:
    if deps.health is None:
        return None
    try:
        return await deps.health.scrape()
    except Exception as err:
        log.debug("relay router scrape failed", extra=fields(error=str(err)))
        return None


async def _retire_removed_providers(p: FleetPass) -> list[Instance]:
    """Destroy VMs of providers no longer in the spec; returns entries whose destroy failed."""
    kept = []
    for instance in p.old:
        provider = str(instance.get("provider") or "")
        if provider in p.spec.provider_names:
            continue
        if not has_real_id(instance) or instance.get("state") == "terminated":
            continue  # placeholders never reach Destroy
        ok = await destroy_vm(
            p, provider, instance["id"], str(instance.get("region", "")), "provider removed"
        )
        if not ok:
            kept.append(instance)  # retried next pass rather than leaked
    return kept


async def _retire_removed_launches(p: FleetPass) -> None:
    """Destroy the VMs of launches that finished after their provider left the spec.

    No slot collects them any more, status never recorded them, and the orphan detector
    spares them (their CR is alive): without this they would run forever. A failed launch
    can leave a VM too (OCI keeps one whose wait timed out), so the launch's region is
    swept for live VMs tagged with this CR and provider.
    """
    launches = p.deps.launches
    for provider in sorted(launches.in_flight(p.uid) - set(p.spec.provider_names)):
        key = LaunchKey(p.uid, provider)
        region = launches.region(key)
        task = launches.collect(key)
        if task is None:
            p.busy = True  # still running: the next pass collects it
            continue
        doomed: set[str] = set()
        if not task.cancelled() and task.exception() is None:
            doomed.add(task.result().instance_id)
        driver = p.deps.drivers.get(provider)
        if driver is not None and region:
            try:
                listed = await driver.list_instances(region)
            except Exception as err:
                log.warning(
                    "listing relay VMs of a removed provider failed",
                    extra=fields(provider=provider, region=region, error=str(err)),
                )
                listed = []
            doomed |= {
                vm.instance_id
                for vm in listed
                if vm.owner_uid == p.uid and vm.provider == provider and vm.live
            }
        for instance_id in sorted(doomed):
            await destroy_vm(p, provider, instance_id, region, "provider removed")


async def _list(p: FleetPass) -> None:
    for slot in p.spec.providers:
        driver = p.deps.drivers.get(slot.provider)
        if driver is None or not p.uid:
            continue
        try:
            p.listings[slot.provider] = await driver.list_instances(slot.region)
        except Exception as err:
            p.listings[slot.provider] = None
            log.debug(
                "listing relay VMs failed",
                extra=fields(provider=slot.provider, region=slot.region, error=str(err)),
            )


async def _keep_or_replace(p: FleetPass, slot: ProviderSpec, entry: Instance) -> Instance | None:
    """Apply health to a slot's VM; None when the VM is gone or was replaced."""
    # Slots match by provider: after a region change the slot's VM still runs (and is
    # destroyed) where status says it is, not in the spec's new region.
    region = str(entry.get("region") or slot.region)
    listing = p.listings.get(slot.provider) if region == slot.region else []
    listed = next((vm for vm in listing or [] if vm.instance_id == entry["id"]), None)
    if listed is not None:
        state: str | None = listed.state
    elif listing is not None:
        state = await _unlisted_state(p, slot.provider, entry["id"], region)
    else:
        state = None  # the listing failed: nothing is known, nothing is decided
    if state is not None and state not in LIVE_STATES:
        if state not in ("terminated", "not-found") and not await destroy_vm(
            p, slot.provider, entry["id"], region, f"VM {state}"
        ):
            return entry
        log.info(
            "relay VM is gone; launching a replacement",
            extra=fields(provider=slot.provider, instance=entry["id"], state=state),
        )
        p.deps.metrics.rotations.labels(provider=slot.provider, reason="gone").inc()
        drop_token(p, slot.provider)
        return None
    if p.report is not None:
        relay = p.report.relays.get(entry["id"])
        healthy = relay is not None and relay.healthy
        if relay is not None:
            entry["429Count"] = relay.count_429
            entry["totalRequests"] = relay.requests_total
            entry["egressBytes"] = relay.egress_bytes
        entry["healthy"] = healthy
        entry["state"] = decisions.transition(str(entry.get("state") or ""), healthy)
        if not entry.get("lastCheck"):
            entry["lastCheck"] = format_time(p.now)
        # The clock starts when the VM was both launched and published to the router (the
        # first lastCheck): a VM adopted long after its launch gets the whole timeout too.
        starts = [
            t
            for t in (
                listed.launched_at if listed is not None else None,
                parse_time(entry.get("lastCheck")),
            )
            if t is not None
        ]
        timeout = timedelta(seconds=p.spec.replacement_timeout_seconds)
        overdue = bool(starts) and p.now - max(starts) >= timeout
        if (
            entry["state"] == "provisioning"
            and overdue
            and await destroy_vm(
                p, slot.provider, entry["id"], region, "not healthy within replacementTimeout"
            )
        ):
            p.deps.metrics.rotations.labels(provider=slot.provider, reason="unhealthy").inc()
            drop_token(p, slot.provider)
            return None
    return entry


async def _unlisted_state(p: FleetPass, provider: str, instance_id: str, region: str) -> str | None:
    """The state of a VM the region's listing left out (terminated long ago, a lagging
    listing, another region): asked of the VM itself, so a listing glitch never replaces a
    running VM. None when that cannot be known."""
    driver = p.deps.drivers.get(provider)
    if driver is None:
        return None
    try:
        status = await driver.get_status(instance_id, region)
    except Exception as err:
        log.debug(
            "relay VM status check failed",
            extra=fields(provider=provider, instance=instance_id, error=str(err)),
        )
        return None
    return status.state


def _set_conditions(
    p: FleetPass,
    conditions: list[Condition],
    instances: list[Instance],
    healthy: int,
    generation: Any,
) -> None:
    decisions.fleet_conditions(
        conditions,
        instances,
        fallback_active=bool(p.report and p.report.fallback_active),
        now=p.now,
    )
    failed = [i for i in instances if i.get("state") == "provisioning-failed"]
    tripped = [i for i in failed if int(i.get("provisioningAttempts") or 0) >= BREAKER_THRESHOLD]
    gen = generation if isinstance(generation, int) else None
    if tripped:
        message = "; ".join(
            f"{i['provider']} failed {i['provisioningAttempts']} times: "
            f"{i.get('lastProvisionError', '')}"
            for i in tripped
        )
        decisions.set_condition(
            conditions,
            "ProvisioningFailed",
            True,
            "CircuitBreakerTripped",
            truncate(message + " (retried after the spec changes)", 1000),
            p.now,
            gen,
        )
    else:
        reason = "Retrying" if failed else "NoFailures"
        message = ", ".join(f"{i['provider']} failed, retrying" for i in failed)
        decisions.set_condition(
            conditions, "ProvisioningFailed", False, reason, message, p.now, gen
        )
    rotating = decisions.find_condition(conditions, "Rotating")
    if rotating and rotating.get("status") == "True" and instances and healthy == len(instances):
        decisions.set_condition(
            conditions, "Rotating", False, "RotationComplete", "replacement is healthy", p.now
        )
