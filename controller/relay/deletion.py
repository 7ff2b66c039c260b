"""Deletion: destroy every VM of the CR, found by status and by tag, then release the finalizer.

The finalizer stays until every VM status knows and every live VM the cloud lists under the
CR's UID is destroyed, and every listing succeeded, so a VM whose launch status never
recorded does not outlive its CR. Placeholder entries never reach destroy. Clearing the
router's peers is best effort: the finalizer must not hang on it.
"""

from __future__ import annotations

import logging
from typing import Final

from controller.relay.deps import RelayDeps
from controller.relay.drivers.base import (
    MANAGED_BY_VALUE,
    TAG_MANAGED_BY,
    TAG_OWNER_UID,
    DriverError,
    truncate,
)
from controller.relay.listing import fleet_regions, list_vms
from controller.relay.peers import sync_peers
from controller.relay.spec import FINALIZER, RelaySpec, SpecError, has_real_id, parse_spec
from controller.toolkit.finalizers import has_finalizer, remove_finalizer
from controller.toolkit.status import write_status
from controller.types import Obj, Requeue
from wspin.core.errors import KubeAPIError, TransientError
from wspin.core.kinds import INFERENCE_RELAYS
from wspin.core.logs import fields

log = logging.getLogger(__name__)

RETRY_SECONDS: Final = 30.0


def _spec_or_none(cr: Obj) -> RelaySpec | None:
    try:
        return parse_spec(cr)
    except SpecError:
        return None  # a spec that cannot be acted on still has status regions to sweep


async def delete_fleet(deps: RelayDeps, cr: Obj) -> Requeue | None:
    """Destroy the fleet's VMs and release the finalizer once none is left."""
    meta = cr["metadata"]
    name, uid = meta["name"], str(meta.get("uid") or "")
    if not has_finalizer(cr, FINALIZER):
        return None
    status: Obj = dict(cr.get("status") or {})
    instances = [dict(i) for i in status.get("instances") or []]
    incomplete: list[str] = []
    targets: dict[str, tuple[str, str]] = {
        str(i["id"]): (str(i.get("provider") or ""), str(i.get("region") or ""))
        for i in instances
        if has_real_id(i) and i.get("state") != "terminated"
    }
    if uid:
        tags = {TAG_MANAGED_BY: MANAGED_BY_VALUE, TAG_OWNER_UID: uid}
        listing = await list_vms(deps.drivers, tags, fleet_regions(_spec_or_none(cr), status))
        incomplete += [f"listing {p} VMs failed: {why}" for p, why in listing.failed.items()]
        for provider, vm in listing.vms:
            if vm.live and vm.owner_uid == uid:
                targets.setdefault(vm.instance_id, (provider, vm.region))
    destroyed: set[str] = set()
    for instance_id, (provider, region) in sorted(targets.items()):
        driver = deps.drivers.get(provider)
        if driver is None:
            log.warning(
                "no driver for relay VM; manual cleanup required",
                extra=fields(relay=name, provider=provider, instance=instance_id),
            )
            incomplete.append(f"{instance_id}: no driver for provider {provider}")
            continue
        try:
            await driver.destroy(instance_id, region)
        except DriverError as err:
            incomplete.append(f"{instance_id}: {truncate(str(err))}")
            continue
        deps.destroyed.add(instance_id)
        destroyed.add(instance_id)
        log.info(
            "destroyed relay VM of a deleted InferenceRelay",
            extra=fields(relay=name, provider=provider, instance=instance_id, region=region),
        )
    for entry in instances:
        if entry.get("id") in destroyed:
            entry["state"] = "terminated"
            entry["healthy"] = False
    written = await write_status(
        deps.kube, INFERENCE_RELAYS, cr, {**status, "instances": instances}
    )
    if incomplete:
        raise TransientError(
            f"InferenceRelay {name}: relay VMs not yet destroyed: " + "; ".join(incomplete),
            "the finalizer stays until they are; fix the cloud credentials or destroy them by hand",
            delay=RETRY_SECONDS,
        )
    try:
        await sync_peers(deps.kube, deps.namespace, [])
    except KubeAPIError as err:
        log.warning("cannot clear relay-router peers", extra=fields(relay=name, error=err.message))
    await remove_finalizer(deps.kube, INFERENCE_RELAYS, written or cr, FINALIZER)
    log.info("all relay VMs destroyed; finalizer removed", extra=fields(relay=name, uid=uid))
    return None
