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
from controller.relay.decisions import BREAKER_THRESHOLD, format_time
from controller.relay.deps import RelayDeps
from controller.relay.drivers.base import (
    truncate,
)
from controller.relay.health import HealthReport
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
    listed = next(
        (vm for vm in p.listings.get(slot.provider) or [] if vm.instance_id == entry["id"]),
        None,
    )
    if listed is not None and not listed.live:
        if listed.state != "terminated" and not await destroy_vm(
            p, slot.provider, entry["id"], listed.region, "VM stopped"
        ):
            return entry
        log.info(
            "relay VM is gone; launching a replacement",
            extra=fields(provider=slot.provider, instance=entry["id"], state=listed.state),
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
        timeout = timedelta(seconds=p.spec.replacement_timeout_seconds)
        launched = listed.launched_at if listed is not None else None
        overdue = launched is not None and p.now - launched >= timeout
        if (
            entry["state"] == "provisioning"
            and overdue
            and await destroy_vm(
                p, slot.provider, entry["id"], slot.region, "not healthy within replacementTimeout"
            )
        ):
            p.deps.metrics.rotations.labels(provider=slot.provider, reason="unhealthy").inc()
            drop_token(p, slot.provider)
            return None
    return entry


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
