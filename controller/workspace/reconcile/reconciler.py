"""The Workspace reconciler: a Workspace key in, the PVC, pod and status brought in line.

Level-based, one pass per key: observe (``observe.snapshot``: the Workspace, its status and
pod from the caches), decide (the handler of its phase, ``phases``, returns a ``Plan``), act
(``act`` makes the plan's writes), record (the status written once, ``record.next_status``;
nothing when unchanged) and a requeue decision (``deadlines``). After the status is committed,
and only then, come the writes and reports that depend on it: the consumed ``spec.suspend``
is cleared (``suspension``), Events are sent, recovery and verification report.

Write flow, in controller-runtime's order: a Workspace without the finalizer gets it (with
the owner-record request when one is missing) in one write, and the pass ends there: that
write's own event brings the next pass. Then the phase's writes (the PVC, then the service
account, credentials and pod), then one status write. Expected answers are not failures: an
object that already exists was created by an earlier pass, a stale version means a newer
event is on its way, a missing object or namespace means there is nothing left to do, and a
namespace being deleted refuses new content until the Workspace's own deletion arrives
(which then releases the finalizer as usual). None of them is logged above debug or retried
with backoff.

Deletion: Terminating while the pod stops with its grace, then Terminated, then the finalizer
goes and owner GC removes the PVC, the service account and the credentials.
"""

from __future__ import annotations

import logging
from typing import Final

from controller.toolkit import episodes
from controller.toolkit.finalizers import (
    finalizer_patch,
    has_finalizer,
    patch_metadata,
    remove_finalizer,
    version_of,
)
from controller.toolkit.status import write_status
from controller.types import (
    Obj,
    ObjectKey,
    Requeue,
    StagingCleanup,
)
from controller.workspace.agent import report as agent_report
from controller.workspace.pod import ownership
from controller.workspace.pod.facts import pod_facts
from controller.workspace.pod.names import names
from controller.workspace.reconcile import deadlines, phases
from controller.workspace.reconcile.act import act, stage
from controller.workspace.reconcile.deps import ReconcileDeps
from controller.workspace.reconcile.observe import snapshot
from controller.workspace.reconcile.owner_record import needs_adoption, record_request
from controller.workspace.reconcile.phases import ORG_SUSPENDED, RUNTIME_NOT_FOUND
from controller.workspace.reconcile.plan import DeletePod, Plan
from controller.workspace.reconcile.record import next_status
from controller.workspace.reconcile.suspension import clear_request
from controller.workspace.reconcile.upkeep import clear_spent_marker
from wspin.core.clock import format_time
from wspin.core.errors import Conflict, KubeAPIError, NamespaceTerminating, NotFound
from wspin.core.kinds import PODS, WORKSPACES
from wspin.core.logs import fields
from wspin.core.workspace import Workspace

__all__ = [
    "CONFLICT_REQUEUE",
    "FINALIZER",
    "ORG_SUSPENDED",
    "RUNTIME_NOT_FOUND",
    "VERIFY_FAILURE_REQUEUE",
    "WorkspaceReconciler",
]

log = logging.getLogger("controller.workspace")

FINALIZER: Final = "workspace.llmsafespaces.dev/finalizer"
"""Held until the pod is gone, so deletion honours the termination grace and is visible
as the Terminating phase."""

VERIFY_FAILURE_REQUEUE: Final = deadlines.VERIFY_FAILURE_RECHECK
CONFLICT_REQUEUE: Final = 30.0
"""Seconds between looks at a foreign object blocking the Workspace: removing one that
carries no workspace labels raises no event in our caches."""


class WorkspaceReconciler:
    """Reconciles ``llmsafespaces.dev/v1`` Workspaces into PVCs, service accounts and pods."""

    name = "workspace"

    def __init__(self, deps: ReconcileDeps) -> None:
        self.deps = deps
        self._superseded: dict[ObjectKey, tuple[str, set[str]]] = {}
        """Per Workspace (its uid, and the cached versions this controller's own writes
        replaced): a reconcile that finds one in the cache would act on what it already
        changed, and the event for the newer version is on its way (it reconciles then). A
        Workspace recreated under the same name has another uid and shares nothing."""

    async def reconcile(self, key: ObjectKey) -> Requeue | None:
        ws = self.deps.workspaces.get(key)
        if ws is None:
            self._superseded.pop(key, None)
            return None  # gone: owner GC removes what it owned
        version = str(ws["metadata"].get("resourceVersion", ""))
        uid = str(ws["metadata"].get("uid", ""))
        seen_uid, stale = self._superseded.pop(key, ("", set()))
        if seen_uid == uid and version in stale:
            self._superseded[key] = (seen_uid, stale)
            return None
        written: list[str] = []
        try:
            if ws["metadata"].get("deletionTimestamp"):
                await self._terminate(ws, written)
                return None
            return await self._converge(ws, written)
        except NamespaceTerminating:
            # The namespace controller removes what a Workspace owns before the Workspace;
            # re-creating it is refused until the Workspace's deletion event arrives.
            log.debug(
                "namespace is being deleted; waiting for the workspace's own deletion",
                extra=fields(workspace=str(key)),
            )
            return None
        except NotFound:
            log.debug("workspace or its namespace is gone", extra=fields(workspace=str(key)))
            return None
        except Conflict:
            log.debug(
                "workspace changed meanwhile; its next event reconciles it",
                extra=fields(workspace=str(key)),
            )
            return None
        finally:
            self._remember_superseded(key, uid, version, written)

    def _remember_superseded(
        self, key: ObjectKey, uid: str, cached: str, written: list[str]
    ) -> None:
        """Every version up to the last one written is stale once the writes went through
        (a write that changed nothing returns the version it found, and sends no event)."""
        if written and written[-1] != cached:
            self._superseded[key] = (uid, {cached, *written[:-1]})

    async def _converge(self, ws: Obj, written: list[str]) -> Requeue | None:
        """The finalizer first (its own event brings the next pass), then the phase's writes,
        one status write, then what must follow the committed status."""
        if await self._ensure_finalizer(ws, written):
            return None
        # The egress policy goes first, so a new pod never starts with open egress.
        egress = await self.deps.egress.ensure(ws) if self.deps.egress is not None else None
        try:
            plan = await phases.run(self.deps, snapshot(self.deps, ws))
        except ownership.ForeignObject as foreign:
            return await self._conflict(ws, foreign.conflict, written)
        await act(self.deps, ws, plan)
        if egress is not None:
            plan.conditions.append(egress.condition)
            plan.due(egress.requeue)
        await stage(self.deps, ws, plan)
        await self._write_status(ws, plan, written)
        if plan.consume is not None:
            # Only once the status records what the request did: cleared first, a failed
            # status write would lose the request. Should the clear fail, the next pass
            # (right away) finds the request in a phase that consumes it without acting again.
            try:
                version = await clear_request(self.deps.kube, ws, plan.consume)
            except KubeAPIError as err:
                log.info(
                    "spec.suspend not cleared yet; retrying",
                    extra=fields(workspace=str(ObjectKey.of(ws)), error=err.message),
                )
                plan.due(deadlines.MIN_REQUEUE)
            else:
                if version is not None:
                    written.append(version)
        if plan.reason == ORG_SUSPENDED and Workspace.of(ws).status.reason != ORG_SUSPENDED:
            await self.deps.events.emit(ws, WORKSPACES, "Warning", ORG_SUSPENDED, plan.detail)
        # Only after the status records the episode: a failed write then means a retry
        # that finds the episode unrecorded, never a second Event for the same one.
        for failure, episode in plan.failures:
            await self.deps.verifier.report(ws, failure, episode)
        await self.deps.recovery.report(ws, plan)
        for notice in plan.notices:
            await self.deps.events.emit(ws, WORKSPACES, notice.type, notice.reason, notice.message)
        await clear_spent_marker(self.deps, ws, plan.restart_generation)
        if plan.error is not None:
            raise plan.error
        return deadlines.next_requeue(plan.requeue, plan.staging_due)

    async def _terminate(self, ws: Obj, written: list[str]) -> None:
        """Stop the pod with the grace, then let the Workspace go. The pod's deletion event
        brings the Workspace back here; nothing is polled meanwhile."""
        if not has_finalizer(ws, FINALIZER):
            return
        namespace = ws["metadata"].get("namespace", "")
        pod_name = names(ws).pod if ws["metadata"].get("uid") else ""
        # Read through the API: the cache may lag, and releasing the finalizer too early
        # would cut the pod's grace short through owner GC.
        pod = await self.deps.kube.get_or_none(PODS, pod_name, namespace) if pod_name else None
        # A foreign pod at our name is left alone: it was never ours to stop.
        if pod is not None and self.deps.writes.owns(pod, ws, "Pod"):
            plan = Plan("Terminating", pod_name=pod_name)
            if not pod_facts(pod).deleting:
                plan.writes.append(DeletePod(pod))
            await act(self.deps, ws, plan)
            await self._write_status(ws, plan, written)
            return
        if isinstance(self.deps.staging, StagingCleanup):
            await self.deps.staging.cleanup(ws)
        # The finalizer goes with the version the status write returned: its own version
        # would be stale by then.
        updated = await self._write_status(ws, Plan("Terminated"), written)
        try:
            removed = await remove_finalizer(self.deps.kube, WORKSPACES, updated or ws, FINALIZER)
        except Conflict:
            self.deps.lifecycle.write_conflict("finalizer")
            raise
        if not removed:
            return
        self.deps.lifecycle.deletion_finished(ws)
        log.info("workspace deleted", extra=fields(workspace=str(ObjectKey.of(ws))))

    async def _ensure_finalizer(self, ws: Obj, written: list[str]) -> bool:
        """Add the finalizer, and ask for the owner record when it is missing, in one write;
        True when something was written (the pass then ends: controller-runtime's order)."""
        patch = finalizer_patch(ws, FINALIZER)
        if needs_adoption(ws, self.deps.settings.owner_record_upgrade):
            # The record's write comes back through the webhook, which replaces the request
            # with the record; the write's event brings the recorded Workspace here.
            patch = {**(patch or version_of(ws)), **record_request()}
        if patch is None:
            return False
        try:
            updated = await patch_metadata(self.deps.kube, WORKSPACES, ws, patch)
        except Conflict:
            self.deps.lifecycle.write_conflict("finalizer")
            raise
        written.append(str(updated["metadata"].get("resourceVersion", "")))
        return True

    async def _conflict(
        self, ws: Obj, found: ownership.ForeignHolding, written: list[str]
    ) -> Requeue | None:
        """Report a foreign object: phase Pending (never Active), Ready=False PodConflict
        naming it, one Warning Event per episode; the object itself is not touched (staging
        still keeps its deadlines)."""
        if episodes.is_new(ws, ownership.recorded(found)):
            log.warning(
                "workspace blocked by a foreign object",
                extra=fields(workspace=str(ObjectKey.of(ws)), kind=found.kind, name=found.name),
            )
            await self.deps.events.emit(
                ws,
                WORKSPACES,
                "Warning",
                ownership.CONFLICT_REASON,
                found.message,
                episode=f"{found.kind}/{found.name}/{found.holder}",
            )
        plan = Plan("Pending", ready_reason=ownership.CONFLICT_REASON, detail=found.message)
        plan.due(CONFLICT_REQUEUE)
        await stage(self.deps, ws, plan)
        await self._write_status(ws, plan, written)
        if plan.error is not None:
            raise plan.error
        return deadlines.next_requeue(plan.requeue, plan.staging_due)

    async def _write_status(self, ws: Obj, plan: Plan, written: list[str]) -> Obj | None:
        """Write ``/status`` when, and only when, something changed; the written object."""
        if self.deps.agents is not None and plan.phase != "Active":
            self.deps.agents.forget(ws)  # its agent is no longer read (and no longer metered)
        old, now = dict(ws.get("status") or {}), self.deps.clock()
        new = agent_report.apply(
            old,
            next_status(old, plan, ws, now),
            plan.agent,
            plan.phase,
            int(ws["metadata"].get("generation") or 0),
            format_time(now),
        )
        try:
            updated = await write_status(self.deps.kube, WORKSPACES, ws, new)
        except Conflict:
            self.deps.lifecycle.write_conflict("status")
            raise
        if updated is not None:
            written.append(str(updated["metadata"].get("resourceVersion", "")))
            setup = plan.pod.setup_seconds if plan.pod is not None else None
            self.deps.lifecycle.status_written(ws, old, new, now, setup_seconds=setup)
        return updated
