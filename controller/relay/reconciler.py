"""``InferenceRelayReconciler``: one InferenceRelay key in, a requeue decision out.

Level-based: every pass observes (the CR, the VMs the cloud lists under its UID, the
router's health), plans (``plan.plan_fleet``, pure), executes the plan, and writes the
status once, as a merge patch. What a launch is doing lives in status, so a restarted
controller picks up exactly where the last one stopped, and every wait is a requeue the
work queue keeps: nothing here sleeps or runs in the background.

In order: deletion (even when paused), the finalizer, the paused annotation, a spec the
controller cannot act on, and otherwise the fleet pass (a manual rotation included).
"""

from __future__ import annotations

import copy
import logging
from typing import Final

from controller.relay.actions import Observation
from controller.relay.announce import announce
from controller.relay.deletion import delete_fleet
from controller.relay.deps import RelayDeps
from controller.relay.drivers.base import (
    MANAGED_BY_VALUE,
    TAG_MANAGED_BY,
    TAG_OWNER_UID,
    CloudInstance,
    DriverError,
    InstanceNotFound,
    truncate,
)
from controller.relay.execute import execute
from controller.relay.fleetstatus import fleet_status, requeue_seconds
from controller.relay.health import HealthReport, HealthScrapeError
from controller.relay.listing import fleet_regions, list_vms
from controller.relay.peers import peer_entries, sync_peers
from controller.relay.plan import REQUEUE_PAUSED, REQUEUE_PROVISIONING, plan_fleet
from controller.relay.spec import (
    FINALIZER,
    PAUSED_ANNOTATION,
    ROTATE_ANNOTATION,
    RelaySpec,
    SpecError,
    has_real_id,
    parse_spec,
)
from controller.toolkit.conditions import condition, set_conditions
from controller.toolkit.events import EventRecorder
from controller.toolkit.finalizers import add_finalizer
from controller.toolkit.status import write_status
from controller.types import Obj, ObjectKey, ObjectReader, Requeue
from wspin.core.clock import format_time
from wspin.core.errors import Conflict, KubeAPIError, TransientError
from wspin.core.kinds import INFERENCE_RELAYS
from wspin.core.logs import fields

log = logging.getLogger(__name__)


class InferenceRelayReconciler:
    """Converges each InferenceRelay's VMs, peers ConfigMap, token Secret and status."""

    name = "inferencerelay"

    def __init__(self, deps: RelayDeps, relays: ObjectReader) -> None:
        self.deps = deps
        self.relays = relays
        self.events = deps.events or EventRecorder(deps.kube, clock=deps.clock)

    async def reconcile(self, key: ObjectKey) -> Requeue | None:
        cached = self.relays.get(key)
        if cached is None:
            return None  # gone: the finalizer already cleaned up
        cr: Obj = copy.deepcopy(cached)
        meta = cr.setdefault("metadata", {})
        if meta.get("deletionTimestamp"):
            return await delete_fleet(self.deps, cr)
        cr = await add_finalizer(self.deps.kube, INFERENCE_RELAYS, cr, FINALIZER)
        annotations = cr["metadata"].get("annotations") or {}
        if annotations.get(PAUSED_ANNOTATION) == "true":
            log.info("relay fleet paused", extra=fields(relay=key.name))
            return Requeue(after=REQUEUE_PAUSED)
        try:
            spec = parse_spec(cr)
        except SpecError as err:
            await self._report_invalid_spec(cr, err)
            return None  # a spec change brings the next event
        return await self._fleet_pass(cr, spec, str(annotations.get(ROTATE_ANNOTATION) or ""))

    async def _fleet_pass(self, cr: Obj, spec: RelaySpec, rotate: str) -> Requeue:
        deps = self.deps
        meta = cr["metadata"]
        uid = str(meta.get("uid") or "")
        generation = meta.get("generation")
        generation = generation if isinstance(generation, int) else None
        status: Obj = dict(cr.get("status") or {})
        cluster = await deps.cluster.resolve()
        now = deps.clock()
        seen = await observe(deps, uid, spec, status)
        health = await self._scrape()
        plan = plan_fleet(
            spec, status, seen, health, uid=uid, now=now, generation=generation, rotate=rotate
        )
        for instance_id in plan.adopted:
            log.info(
                "adopted a tagged relay VM missing from status",
                extra=fields(relay=meta.get("name"), instance=instance_id),
            )
        outcome = await execute(deps, plan, spec=spec, uid=uid, cluster=cluster, now=now)
        await announce(self.events, deps.metrics, cr, spec, plan, outcome)
        rotated = ""
        if plan.rotated and not outcome.rotation_failed:
            target = next(i for i in status.get("instances") or [] if i.get("id") == rotate)
            rotated = f"rotated {target.get('provider')} relay {rotate}"
            log.info("rotated relay VM", extra=fields(relay=meta.get("name"), instance=rotate))
        minimum = min(spec.min_healthy, len(spec.providers))
        deps.metrics.record_fleet(outcome.instances)
        try:
            await sync_peers(
                deps.kube, deps.namespace, peer_entries(outcome.instances, outcome.tokens)
            )
        except KubeAPIError as err:  # the router keeps its last list; status still gets written
            log.warning("cannot sync relay-router peers", extra=fields(error=err.message))
        new = fleet_status(
            status,
            outcome.instances,
            health,
            now=now,
            generation=generation,
            rotated=rotated,
            minimum=minimum,
            notes=plan.held,
        )
        written = await write_status(deps.kube, INFERENCE_RELAYS, cr, new)
        _check_schema(new, written)
        if outcome.rotation_failed:
            # The annotation stays, so the rotation is retried (with the queue's backoff);
            # other failed destroys keep their entry in status and are retried next pass.
            raise TransientError(
                f"InferenceRelay {meta.get('name')}: rotating {rotate} failed: "
                + "; ".join(outcome.failures),
                "fix the cloud credentials or destroy the VM by hand",
            )
        if rotate:
            if not rotated:
                log.info(
                    "rotate annotation names no instance of this fleet; clearing it",
                    extra=fields(relay=meta.get("name"), instance=rotate),
                )
            return await self._clear_rotation(written or cr)
        return Requeue(after=requeue_seconds(outcome.instances, plan.waits))

    async def _scrape(self) -> HealthReport | None:
        if self.deps.health is None:
            return None
        try:
            return await self.deps.health.scrape()
        except HealthScrapeError as err:
            log.debug("relay router scrape failed", extra=fields(error=err.message))
            return None

    async def _clear_rotation(self, cr: Obj) -> Requeue:
        """Cleared to "" only after status records the rotation, so a failed step is retried,
        not forgotten."""
        meta = cr["metadata"]
        patch = {
            "metadata": {
                "annotations": {ROTATE_ANNOTATION: ""},
                "resourceVersion": meta.get("resourceVersion"),
            }
        }
        try:
            await self.deps.kube.patch(INFERENCE_RELAYS, meta["name"], patch)
        except Conflict:
            return Requeue(after=0.0)
        return Requeue(after=REQUEUE_PROVISIONING)

    async def _report_invalid_spec(self, cr: Obj, err: SpecError) -> None:
        log.warning(
            "invalid InferenceRelay spec",
            extra=fields(relay=cr["metadata"]["name"], error=str(err)),
        )
        status: Obj = dict(cr.get("status") or {})
        status["conditions"] = set_conditions(
            status.get("conditions") or [],
            [
                condition("Ready", False, "InvalidSpec", str(err), None),
                condition("Degraded", True, "InvalidSpec", str(err), None),
            ],
            format_time(self.deps.clock()),
        )
        status.setdefault("instances", [])
        status.setdefault("healthyReplicas", 0)
        await write_status(self.deps.kube, INFERENCE_RELAYS, cr, status)


CRD_RECHECK: Final = 60.0
"""Seconds between passes while the CRD is out of date (applying it raises no event here)."""
TRACKING_KEYS: Final = ("replaces", "tokenKey", "unhealthySince", "launchedAt")
"""Status keys replacement depends on: an InferenceRelay CRD older than the controller
prunes them, and the controller would lose track of which VM replaces which."""


def _check_schema(sent: Obj, written: Obj | None) -> None:
    """Fail loudly when the API server dropped a status key the controller relies on."""
    if written is None:
        return
    stored = (written.get("status") or {}).get("instances") or []
    for index, entry in enumerate(sent.get("instances") or []):
        kept = stored[index] if index < len(stored) else {}
        lost = [key for key in TRACKING_KEYS if key in entry and key not in kept]
        if lost:
            raise TransientError(
                f"the InferenceRelay CRD in this cluster drops status.instances[]."
                f"{lost[0]}: it is older than this controller, which cannot track its relay "
                "VMs' replacements with it",
                "apply the chart's CRDs: kubectl apply --server-side -f charts/wspin/crds/",
                delay=CRD_RECHECK,
            )


async def observe(deps: RelayDeps, uid: str, spec: RelaySpec, status: Obj) -> Observation:
    """The VMs tagged with ``uid`` where the spec and the status say they may run, and the
    status VMs the listing left out, asked of the cloud one by one."""
    vms: list[CloudInstance] = []
    unlisted: set[str] = set()
    if uid:
        tags = {TAG_MANAGED_BY: MANAGED_BY_VALUE, TAG_OWNER_UID: uid}
        listing = await list_vms(deps.drivers, tags, fleet_regions(spec, status))
        for provider, error in listing.failed.items():
            unlisted.add(provider)
            log.debug("listing relay VMs failed", extra=fields(provider=provider, error=error))
        # A VM tagged for another provider cannot be this cloud's to manage; one with no
        # provider tag (older releases) is a candidate for this provider's slot.
        vms = [vm for provider, vm in listing.vms if vm.provider in ("", provider)]
    listed_ids = {vm.instance_id for vm in vms}
    described: dict[str, CloudInstance | None] = {}
    unknown: set[str] = set()
    for entry in status.get("instances") or []:
        provider = str(entry.get("provider") or "")
        driver = deps.drivers.get(provider)
        if driver is None or provider in unlisted or not has_real_id(entry):
            continue
        if entry["id"] in listed_ids or entry.get("state") == "terminated":
            continue
        # A listing can leave a running VM out (lag, paging): asked of the VM itself, so a
        # listing glitch never replaces a running VM.
        try:
            described[entry["id"]] = await driver.describe(
                entry["id"], str(entry.get("region") or "")
            )
        except InstanceNotFound:
            described[entry["id"]] = None
        except DriverError as err:
            unknown.add(entry["id"])
            log.debug(
                "relay VM status check failed",
                extra=fields(provider=provider, instance=entry["id"], error=truncate(str(err))),
            )
    return Observation(
        vms=vms,
        unlisted=unlisted,
        described=described,
        unknown=unknown,
        destroyed=deps.destroyed,
        drivers=set(deps.drivers),
    )
