"""``InferenceRelayReconciler``: one InferenceRelay key in, a requeue decision out.

Level-based: every pass reads the CR and the cloud and converges, whatever events came
before. In order: deletion (even when paused), the finalizer, the paused annotation, a
spec the controller cannot act on, a manual rotation, and otherwise the fleet pass.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from controller.relay import decisions
from controller.relay.deletion import delete_fleet
from controller.relay.deps import RelayDeps
from controller.relay.fleet import fleet_pass
from controller.relay.passstate import RetryBook
from controller.relay.rotation import rotate
from controller.relay.spec import (
    FINALIZER,
    PAUSED_ANNOTATION,
    ROTATE_ANNOTATION,
    SpecError,
    parse_spec,
)
from controller.types import ObjectKey, ObjectReader, Requeue
from wspin.logs import fields
from wspin.resources import INFERENCE_RELAYS

log = logging.getLogger(__name__)


class InferenceRelayReconciler:
    """Converges each InferenceRelay's VMs, peers ConfigMap, token Secret and status."""

    name = "inferencerelay"

    def __init__(self, deps: RelayDeps, relays: ObjectReader) -> None:
        self.deps = deps
        self.relays = relays
        self.retries = RetryBook()

    async def reconcile(self, key: ObjectKey) -> Requeue | None:
        cached = self.relays.get(key)
        if cached is None:
            return None  # gone: the finalizer already cleaned up
        cr: dict[str, Any] = copy.deepcopy(cached)
        meta = cr.setdefault("metadata", {})
        if meta.get("deletionTimestamp"):
            in_flight = self.deps.launches.forget(str(meta.get("uid") or ""))
            return await delete_fleet(self.deps, cr, launches_in_flight=in_flight)
        if FINALIZER not in (meta.get("finalizers") or []):
            cr = await self._add_finalizer(cr)
            meta = cr["metadata"]
        annotations = meta.get("annotations") or {}
        if annotations.get(PAUSED_ANNOTATION) == "true":
            log.info("relay fleet paused", extra=fields(relay=key.name))
            return Requeue(after=decisions.REQUEUE_PAUSED)
        try:
            spec = parse_spec(cr)
        except SpecError as err:
            await self._report_invalid_spec(cr, err)
            return None  # a spec change brings the next event
        if annotations.get(ROTATE_ANNOTATION):
            return await rotate(self.deps, cr, str(annotations[ROTATE_ANNOTATION]))
        before = copy.deepcopy(cr.get("status") or {})
        requeue = await fleet_pass(self.deps, cr, spec, self.retries)
        if cr.get("status") != before:
            await self.deps.kube.replace(INFERENCE_RELAYS, cr, sub="status")
        return requeue

    async def _add_finalizer(self, cr: dict[str, Any]) -> dict[str, Any]:
        meta = cr["metadata"]
        patch = {
            "metadata": {
                "finalizers": [*(meta.get("finalizers") or []), FINALIZER],
                "resourceVersion": meta.get("resourceVersion"),
            }
        }
        return await self.deps.kube.patch(INFERENCE_RELAYS, meta["name"], patch)

    async def _report_invalid_spec(self, cr: dict[str, Any], err: SpecError) -> None:
        log.warning(
            "invalid InferenceRelay spec",
            extra=fields(relay=cr["metadata"]["name"], error=str(err)),
        )
        status = cr.setdefault("status", {})
        before = copy.deepcopy(status)
        conditions = list(status.get("conditions") or [])
        now = self.deps.clock()
        decisions.set_condition(conditions, "Ready", False, "InvalidSpec", str(err), now)
        decisions.set_condition(conditions, "Degraded", True, "InvalidSpec", str(err), now)
        status["conditions"] = conditions
        status.setdefault("instances", [])
        status.setdefault("healthyReplicas", 0)
        if status != before:
            await self.deps.kube.replace(INFERENCE_RELAYS, cr, sub="status")

    async def close(self) -> None:
        """Cancel in-flight launches at shutdown (their VMs are adopted after a restart)."""
        await self.deps.launches.close()
