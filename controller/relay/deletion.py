"""Deletion: destroy every VM of the CR, sweep the cloud by tag, then release the finalizer.

The finalizer stays until every VM status knows is destroyed and a tag sweep found no VM
left for this UID, so a VM whose creation status never recorded does not outlive its CR.
Placeholder entries never reach Destroy (the reference passed them, which blocked deletion
on AWS forever). Clearing the router's peers is best effort: the finalizer must not hang on it.
"""

from __future__ import annotations

import logging
from typing import Any

from controller.relay.deps import RelayDeps
from controller.relay.peers import sync_peers
from controller.relay.spec import FINALIZER, has_real_id
from controller.types import Requeue
from wspin.errors import TransientError
from wspin.logs import fields
from wspin.resources import INFERENCE_RELAYS

log = logging.getLogger(__name__)

RETRY_SECONDS = 30.0


async def delete_fleet(
    deps: RelayDeps, cr: dict[str, Any], *, launches_in_flight: int = 0
) -> Requeue | None:
    """Destroy the fleet's VMs and release the finalizer once none is left.

    ``launches_in_flight``: launches this pass cancelled while they ran. Their cloud call
    may still create a VM after the tag sweep below, so the finalizer waits one more round.
    """
    meta = cr["metadata"]
    name, uid = meta["name"], str(meta.get("uid") or "")
    if FINALIZER not in (meta.get("finalizers") or []):
        return None
    status = cr.setdefault("status", {})
    instances = list(status.get("instances") or [])
    incomplete: list[str] = []
    progress = False
    for instance in instances:
        if instance.get("state") == "terminated" or not has_real_id(instance):
            continue
        provider, instance_id = str(instance.get("provider") or ""), str(instance["id"])
        driver = deps.drivers.get(provider)
        if driver is None:
            log.warning(
                "no driver for relay VM; manual cleanup required",
                extra=fields(relay=name, provider=provider, instance=instance_id),
            )
            incomplete.append(f"{instance_id}: no driver for provider {provider}")
            continue
        try:
            await driver.destroy(instance_id, str(instance.get("region") or ""))
        except Exception as err:
            incomplete.append(f"{instance_id}: {err}")
            continue
        instance["state"] = "terminated"
        instance["healthy"] = False
        progress = True
    if progress:
        status["instances"] = instances
        written = await deps.kube.replace(INFERENCE_RELAYS, cr, sub="status")
        meta["resourceVersion"] = written.get("metadata", {}).get("resourceVersion")
    if uid:
        incomplete.extend(await _sweep_tags(deps, cr, uid, {str(i.get("id")) for i in instances}))
    if launches_in_flight:
        incomplete.append(f"{launches_in_flight} VM launch(es) were in flight; sweeping again")
    if incomplete:
        raise TransientError(
            f"InferenceRelay {name}: relay VMs not yet destroyed: " + "; ".join(incomplete),
            "the finalizer stays until they are; fix the cloud credentials or destroy them by hand",
            delay=RETRY_SECONDS,
        )
    try:
        await sync_peers(deps.kube, deps.namespace, [])
    except Exception as err:
        log.warning("cannot clear relay-router peers", extra=fields(relay=name, error=str(err)))
    patch = {
        "metadata": {
            "finalizers": [f for f in meta.get("finalizers") or [] if f != FINALIZER],
            "resourceVersion": meta.get("resourceVersion"),
        }
    }
    await deps.kube.patch(INFERENCE_RELAYS, name, patch)
    log.info("all relay VMs destroyed; finalizer removed", extra=fields(relay=name, uid=uid))
    return None


async def _sweep_tags(
    deps: RelayDeps, cr: dict[str, Any], uid: str, processed: set[str]
) -> list[str]:
    """Destroy live VMs tagged with ``uid`` that status does not list; returns failures."""
    pairs = {
        (str(p.get("provider", "")), str(p.get("region", "")))
        for p in (cr.get("spec") or {}).get("providers") or []
    }
    pairs |= {
        (str(i.get("provider", "")), str(i.get("region", "")))
        for i in (cr.get("status") or {}).get("instances") or []
    }
    failures = []
    for provider, region in sorted(pairs):
        driver = deps.drivers.get(provider)
        if driver is None or not region:
            continue
        try:
            listed = await driver.list_instances(region)
        except Exception as err:
            log.debug(
                "tag sweep listing failed",
                extra=fields(provider=provider, region=region, error=str(err)),
            )
            continue
        for vm in listed:
            if vm.owner_uid != uid or vm.instance_id in processed or not vm.live:
                continue
            processed.add(vm.instance_id)
            try:
                await driver.destroy(vm.instance_id, region)
            except Exception as err:
                failures.append(f"{vm.instance_id}: {err}")
                continue
            log.info(
                "tag sweep destroyed a relay VM missing from status",
                extra=fields(provider=provider, instance=vm.instance_id, region=region),
            )
    return failures
