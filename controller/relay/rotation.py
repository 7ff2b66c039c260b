"""Manual rotation: destroy the VM the rotate annotation names; the next pass launches anew.

The replacement gets a fresh token (the rotated VM's token is dropped from the Secret), so a
rotation also rotates the credential the old VM held. The annotation is cleared to ``""``
only after status records the rotation, so a failed step is retried, not forgotten.
"""

from __future__ import annotations

import logging
from typing import Any

from controller.relay import decisions
from controller.relay.decisions import REQUEUE_PROVISIONING
from controller.relay.deps import RelayDeps
from controller.relay.spec import ROTATE_ANNOTATION, has_real_id
from controller.relay.tokens import read_tokens, write_tokens
from controller.toolkit.clock import format_time
from controller.types import Requeue
from wspin.errors import TransientError
from wspin.logs import fields
from wspin.resources import INFERENCE_RELAYS, Conflict

log = logging.getLogger(__name__)


async def rotate(deps: RelayDeps, cr: dict[str, Any], instance_id: str) -> Requeue:
    name = cr["metadata"]["name"]
    status = cr.setdefault("status", {})
    instances = list(status.get("instances") or [])
    target = next((i for i in instances if i.get("id") == instance_id), None)
    if target is None:
        log.info(
            "rotate annotation names no instance of this fleet; clearing it",
            extra=fields(relay=name, instance=instance_id),
        )
        return await _clear_annotation(deps, cr)
    provider = str(target.get("provider") or "")
    driver = deps.drivers.get(provider)
    if driver is None:
        raise TransientError(
            f"cannot rotate relay {instance_id}: no driver for provider {provider}",
            "remove the provider from spec.providers or run the controller with its driver",
        )
    if has_real_id(target):
        try:
            await driver.destroy(instance_id, str(target.get("region") or ""))
        except Exception as err:
            raise TransientError(
                f"rotating relay {instance_id} ({provider}): destroy failed: {err}"
            ) from err
        deps.destroyed.add(instance_id)
    deps.metrics.rotations.labels(provider=provider, reason="manual").inc()
    tokens = await read_tokens(deps.kube, deps.namespace)
    if tokens.pop(provider, None) is not None:
        await write_tokens(deps.kube, deps.namespace, tokens)
    now = deps.clock()
    remaining = [i for i in instances if i is not target]
    status["instances"] = remaining
    status["healthyReplicas"] = sum(1 for i in remaining if i.get("healthy"))
    status["lastRotation"] = format_time(now)
    conditions = list(status.get("conditions") or [])
    decisions.set_condition(
        conditions,
        "Rotating",
        True,
        "ManualRotation",
        f"rotated {provider} relay {instance_id}",
        now,
    )
    status["conditions"] = conditions
    written = await deps.kube.replace(INFERENCE_RELAYS, cr, sub="status")
    log.info("rotated relay VM", extra=fields(relay=name, provider=provider, instance=instance_id))
    cr["metadata"]["resourceVersion"] = written.get("metadata", {}).get("resourceVersion")
    return await _clear_annotation(deps, cr)


async def _clear_annotation(deps: RelayDeps, cr: dict[str, Any]) -> Requeue:
    meta = cr["metadata"]
    patch = {
        "metadata": {
            "annotations": {ROTATE_ANNOTATION: ""},
            "resourceVersion": meta.get("resourceVersion"),
        }
    }
    try:
        await deps.kube.patch(INFERENCE_RELAYS, meta["name"], patch)
    except Conflict:
        return Requeue(after=0.0)
    return Requeue(after=REQUEUE_PROVISIONING)
