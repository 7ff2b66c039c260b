"""The Workspace reconciler: a Workspace key in, the PVC, pod and status brought in line.

Level-based (STYLE.md §4): every reconcile reads the Workspace and its pod from the caches,
works out what should exist, writes the difference and returns a requeue decision. Pod and
status decisions are the pure functions in ``pod``, ``status`` and ``verify``.

Lifecycle: Pending → Creating → Active; ``spec.suspend`` → Suspending → Suspended (the PVC is
kept; resuming builds a new pod); deletion → Terminating (the pod gets the termination grace,
then the finalizer goes and owner GC removes the PVC); Failed with a reason when the pod
cannot be built. A new ``restartGeneration`` or ``architecture`` recreates the pod.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Protocol, runtime_checkable

from controller.settings import WorkspaceSettings
from controller.types import ObjectKey, ObjectReader, Requeue
from controller.workspace import ownership, verify
from controller.workspace import pod as build
from controller.workspace import status as st
from controller.workspace.metrics import VerifyMetrics
from wspin.contract import ARTIFACTS
from wspin.logs import fields
from wspin.resources import (
    EVENTS,
    PODS,
    PVCS,
    SERVICE_ACCOUNTS,
    WORKSPACES,
    AlreadyExists,
    Invalid,
    Kube,
    NotFound,
)

log = logging.getLogger("controller.workspace")

Obj = dict[str, Any]

FINALIZER: Final = "workspace.llmsafespaces.dev/finalizer"
"""Held until the pod is gone, so deletion honours the termination grace and is visible
as the Terminating phase."""
EVENT_SOURCE: Final = "wspin-controller"

# While something is in motion (pod starting or stopping) come back soon; the pod watch
# usually triggers earlier. 2 s is the reference's Creating requeue.
PROGRESS_REQUEUE: Final = 2.0
# A verify failure is handled, not retried: the pod crash-loops on its own and a faster
# requeue would only spin (reference/pod-delivery.md §3.6).
VERIFY_FAILURE_REQUEUE: Final = 300.0
# A foreign object at one of our names is looked at again on this period: removing an
# unlabelled one raises no event in our caches.
CONFLICT_REQUEUE: Final = 30.0


@dataclass(frozen=True)
class StagingReport:
    """What a staging pass wants on the Workspace's status."""

    conditions: list[Obj] = field(default_factory=list)
    """Conditions to set (type, status, reason, message)."""
    remove: tuple[str, ...] = ()
    """Condition types to drop (the cause they reported is gone)."""
    error: Exception | None = None
    """Raised after the status is written, so the reconcile is retried with backoff while
    what the pass recorded (e.g. an incomplete revocation) is already visible."""


class StagingPass(Protocol):
    """The per-workspace relay staging pass, run in Creating and Active when armed.

    Returns the conditions it wants on the Workspace (a bare list means "set these"); it
    must never put a staged key in a condition, Event or log line.
    """

    async def run(self, ws: Obj) -> list[Obj] | StagingReport: ...


@runtime_checkable
class StagingCleanup(Protocol):
    """A staging pass that also cleans up what it staged when its Workspace is deleted;
    it must not raise (termination is never blocked on relay cleanup)."""

    async def cleanup(self, ws: Obj) -> None: ...


@dataclass
class _Outcome:
    phase: st.Phase
    requeue: float | None
    detail: str = ""
    conditions: list[Obj] = field(default_factory=list)
    """Conditions beyond Ready (verification, relay staging)."""
    failures: list[verify.VerifyFailure] = field(default_factory=list)
    """Verify failures starting a new episode: reported once the status records them."""
    remove: tuple[str, ...] = ()
    """Condition types to drop (relay staging causes that went away)."""
    error: Exception | None = None
    """Raised once the status is written (relay staging incomplete)."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


class WorkspaceReconciler:
    """Reconciles ``llmsafespaces.dev/v1`` Workspaces into PVCs, service accounts and pods."""

    name = "workspace"

    def __init__(
        self,
        kube: Kube,
        workspaces: ObjectReader,
        pods: ObjectReader,
        pvcs: ObjectReader,
        settings: WorkspaceSettings,
        *,
        metrics: VerifyMetrics,
        staging: StagingPass | None = None,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.kube = kube
        self.workspaces = workspaces
        self.pods = pods
        self.pvcs = pvcs
        self.settings = settings
        self.metrics = metrics
        self.staging = staging
        self.clock = clock

    async def reconcile(self, key: ObjectKey) -> Requeue | None:
        ws = self.workspaces.get(key)
        if ws is None:
            return None  # gone: owner GC removes what it owned
        if ws["metadata"].get("deletionTimestamp"):
            return await self._terminate(ws)
        if FINALIZER not in (ws["metadata"].get("finalizers") or []):
            ws = await self._add_finalizer(ws)
        try:
            pod_body = build.desired_pod(ws, self.settings)
            pvc_body = build.desired_pvc(ws)
            pvc = self.pvcs.get(ObjectKey(key.namespace, pvc_body["metadata"]["name"]))
            ownership.check_owned(pvc, ws, "PersistentVolumeClaim")
            if pvc is None:
                await self._create(PVCS, pvc_body, ws)
            if (ws.get("spec") or {}).get("suspend"):
                outcome = await self._suspend(ws)
            else:
                outcome = await self._run(ws, pod_body)
        except build.PodBuildError as err:
            log.warning(
                "workspace pod cannot be built",
                extra=fields(workspace=str(key), error=err.message),
            )
            await self._write_status(ws, _Outcome("Failed", None, err.message))
            return None
        except ownership.ForeignObject as foreign:
            return await self._conflict(ws, foreign.conflict)
        await self._write_status(ws, outcome)
        # Only after the status records the episode: a failed write then means a retry
        # that finds the episode unrecorded, never a second Event for the same one.
        for failure in outcome.failures:
            await self._report(ws, failure)
        if outcome.error is not None:
            raise outcome.error
        return Requeue(outcome.requeue) if outcome.requeue is not None else None

    # -- phases -----------------------------------------------------------------------------

    async def _run(self, ws: Obj, pod_body: Obj) -> _Outcome:
        """Pending/Creating/Active: make the pod exist, then read its state."""
        key = ObjectKey.of(ws)
        previous = str((ws.get("status") or {}).get("phase") or "")
        pod = self.pods.get(ObjectKey(key.namespace, pod_body["metadata"]["name"]))
        ownership.check_owned(pod, ws, "Pod")
        if pod is not None and not st.pod_deleting(pod):
            stale = build.pod_is_stale(pod, ws) or (
                "pod ended (evicted or node lost)" if st.pod_terminal(pod) else None
            )
            if stale:
                log.info("recreating workspace pod", extra=fields(workspace=str(key), why=stale))
                await self._delete_pod(pod)
                return _Outcome(st.running_phase(None, previous), PROGRESS_REQUEUE, stale)
        if pod is None:
            outcome = _Outcome(st.running_phase(None, previous), PROGRESS_REQUEUE)
            # Staged before the pod is built, so its first start finds its relay handoff.
            await self._stage(ws, outcome)
            # The pod's identity first: the API server refuses a pod whose account is missing.
            await self._create(SERVICE_ACCOUNTS, build.desired_service_account(ws), ws)
            await self._create(PODS, pod_body, ws)
            return outcome
        if st.pod_deleting(pod):
            return _Outcome(
                st.running_phase(pod, previous), PROGRESS_REQUEUE, "waiting for the old pod to stop"
            )
        phase = st.running_phase(pod, previous)
        outcome = _Outcome(phase, None if phase == "Active" else PROGRESS_REQUEUE)
        failure = await self._verify(ws, pod, phase, outcome)
        if failure is not None:
            outcome.requeue = VERIFY_FAILURE_REQUEUE
        if phase in ("Creating", "Active"):
            await self._stage(ws, outcome)
        return outcome

    async def _stage(self, ws: Obj, outcome: _Outcome) -> None:
        """Run the relay staging pass, when armed, and fold its report into ``outcome``."""
        if self.staging is None:
            return
        report = await self.staging.run(ws)
        if isinstance(report, list):
            report = StagingReport(report)
        outcome.conditions += report.conditions
        outcome.remove = (*outcome.remove, *report.remove)
        outcome.error = report.error

    async def _suspend(self, ws: Obj) -> _Outcome:
        pod_name = build.names(ws).pod
        pod = self.pods.get(ObjectKey(ws["metadata"].get("namespace", ""), pod_name))
        if pod is None:
            return _Outcome("Suspended", None)
        ownership.check_owned(pod, ws, "Pod")
        if not st.pod_deleting(pod):
            await self._delete_pod(pod)
        return _Outcome("Suspending", PROGRESS_REQUEUE)

    async def _terminate(self, ws: Obj) -> Requeue | None:
        """Stop the pod with the grace, then let the Workspace go."""
        if FINALIZER not in (ws["metadata"].get("finalizers") or []):
            return None
        namespace = ws["metadata"].get("namespace", "")
        pod_name = build.names(ws).pod if ws["metadata"].get("uid") else ""
        # Read through the API: the cache may lag, and releasing the finalizer too early
        # would cut the pod's grace short through owner GC.
        pod = await self.kube.get_or_none(PODS, pod_name, namespace) if pod_name else None
        if pod is not None and ownership.conflict_of(pod, ws, "Pod") is None:
            if not st.pod_deleting(pod):
                await self._delete_pod(pod)
            await self._write_status(ws, _Outcome("Terminating", PROGRESS_REQUEUE))
            return Requeue(PROGRESS_REQUEUE)
        if isinstance(self.staging, StagingCleanup):
            await self.staging.cleanup(ws)
        finalizers = [f for f in ws["metadata"].get("finalizers") or [] if f != FINALIZER]
        try:
            await self.kube.patch(
                WORKSPACES,
                ws["metadata"]["name"],
                {
                    "metadata": {
                        "finalizers": finalizers,
                        "resourceVersion": ws["metadata"]["resourceVersion"],
                    }
                },
                namespace,
            )
        except NotFound:
            return None
        log.info("workspace deleted", extra=fields(workspace=str(ObjectKey.of(ws))))
        return None

    # -- verify-failure detection -----------------------------------------------------------

    async def _verify(
        self, ws: Obj, pod: Obj, phase: st.Phase, outcome: _Outcome
    ) -> verify.VerifyFailure | None:
        """Verified conditions for the pod into ``outcome``; a failure that starts a new
        episode is queued for its one Event and metric increment."""
        generation = int(ws["metadata"].get("generation") or 0)
        current = (ws.get("status") or {}).get("conditions") or []
        failure = verify.detect_failure(pod)
        for artifact in ARTIFACTS:
            if not verify.has_marker(pod, artifact):
                # Never marked verified, never blamed; a verdict left over from an earlier
                # pod would claim a check this pod never ran, so it goes.
                outcome.remove = (*outcome.remove, verify.condition_type(artifact))
                continue
            if failure is not None and failure.artifact == artifact:
                outcome.conditions.append(verify.failed_condition(failure, generation))
                if await self._new_episode(ws, current, failure):
                    outcome.failures.append(failure)
            elif phase == "Active" and st.pod_ready(pod):
                outcome.conditions.append(verify.verified_condition(artifact, generation))
        return failure

    async def _new_episode(
        self, ws: Obj, current: list[Obj], failure: verify.VerifyFailure
    ) -> bool:
        """True unless the same False reason is already recorded; checked against the live
        object too, since a cached Workspace can lag behind the status written a moment ago."""
        type_ = verify.condition_type(failure.artifact)

        def recorded(conditions: list[Obj]) -> bool:
            old = st.find_condition(conditions, type_)
            return bool(old and old["status"] == "False" and old["reason"] == failure.kind.reason)

        if recorded(current):
            return False
        meta = ws["metadata"]
        live = await self.kube.get_or_none(WORKSPACES, meta["name"], meta.get("namespace"))
        return live is not None and not recorded((live.get("status") or {}).get("conditions") or [])

    async def _report(self, ws: Obj, failure: verify.VerifyFailure) -> None:
        """One metric increment, one error log line and one Warning Event."""
        self.metrics.record(failure)
        log.error(
            "workspace binary verification failed",
            extra=fields(
                workspace=str(ObjectKey.of(ws)),
                condition=verify.condition_type(failure.artifact),
                reason=failure.kind.reason,
                exit_code=failure.exit_code,
                node=failure.node,
                digest=failure.digest,
            ),
        )
        await self._event(ws, failure.kind.reason, verify.event_message(failure))

    async def _event(self, ws: Obj, reason: str, message: str) -> None:
        meta = ws["metadata"]
        now = self._now()
        body = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta.get("namespace")},
            "involvedObject": {
                "apiVersion": WORKSPACES.api_version,
                "kind": WORKSPACES.kind,
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": "Warning",
            "source": {"component": EVENT_SOURCE},
            "reportingComponent": EVENT_SOURCE,
            "reportingInstance": EVENT_SOURCE,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.kube.create(EVENTS, body, meta.get("namespace"))
        except Exception as err:  # an Event is best effort; the condition already says it
            log.warning(
                "could not record event",
                extra=fields(workspace=str(ObjectKey.of(ws)), reason=reason, error=str(err)),
            )

    # -- writes -----------------------------------------------------------------------------

    async def _add_finalizer(self, ws: Obj) -> Obj:
        meta = ws["metadata"]
        finalizers = [*(meta.get("finalizers") or []), FINALIZER]
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        return await self.kube.patch(WORKSPACES, meta["name"], patch, meta.get("namespace"))

    async def _create(self, resource: Any, body: Obj, ws: Obj) -> None:
        """Create ``body``; a 422 becomes PodBuildError (phase Failed with the API server's
        reason): the same body is refused every time, so retrying with backoff would only
        leave the Workspace Pending with no word on why. A spec edit or a controller restart
        with corrected flags reconciles it again.

        AlreadyExists is ours when the cache lags behind our own create, or someone else's
        object at our name (the caches hold only labelled objects): read live and raise
        ``ForeignObject`` unless the Workspace controls it."""
        meta = body["metadata"]
        try:
            await self.kube.create(resource, body, meta["namespace"])
        except AlreadyExists:
            live = await self.kube.get_or_none(resource, meta["name"], meta["namespace"])
            ownership.check_owned(live, ws, str(body.get("kind") or resource.kind))
        except Invalid as err:
            raise build.PodBuildError(
                f"the API server rejected the {body.get('kind', 'object')}: {err.message}"
            ) from err

    async def _conflict(self, ws: Obj, found: ownership.Conflict) -> Requeue:
        """Report a foreign object: Ready=False, phase Pending, one Warning Event per episode.

        The episode is checked against the live Workspace too, since the cached one can lag
        behind the status written a moment ago."""
        meta = ws["metadata"]
        log.warning(
            "workspace blocked by a foreign object",
            extra=fields(workspace=str(ObjectKey.of(ws)), kind=found.kind, name=found.name),
        )
        new = ownership.new_episode((ws.get("status") or {}).get("conditions") or [], found)
        if new:
            live = await self.kube.get_or_none(WORKSPACES, meta["name"], meta.get("namespace"))
            conditions = ((live or {}).get("status") or {}).get("conditions") or []
            new = live is not None and ownership.new_episode(conditions, found)
        generation = int(meta.get("generation") or 0)
        outcome = _Outcome("Pending", CONFLICT_REQUEUE, found.message)
        outcome.conditions.append(ownership.conflict_condition(found, generation))
        await self._write_status(ws, outcome)
        if new:
            await self._event(ws, ownership.CONFLICT_REASON, found.message)
        return Requeue(CONFLICT_REQUEUE)

    async def _delete_pod(self, pod: Obj) -> None:
        meta = pod["metadata"]
        await self.kube.delete(
            PODS,
            meta["name"],
            meta.get("namespace"),
            grace_seconds=self.settings.termination_grace,
        )

    async def _write_status(self, ws: Obj, outcome: _Outcome) -> None:
        """Write ``/status`` when, and only when, something changed."""
        meta = ws["metadata"]
        old: Obj = dict(ws.get("status") or {})
        generation = int(meta.get("generation") or 0)
        now = self._now()
        conditions = list(old.get("conditions") or [])
        conditions = st.set_condition(
            conditions, st.ready_condition(outcome.phase, generation, outcome.detail), now
        )
        for condition in outcome.conditions:
            conditions = st.set_condition(conditions, condition, now)
        conditions = [c for c in conditions if c.get("type") not in outcome.remove]
        new: Obj = {
            **old,
            "phase": outcome.phase,
            "observedGeneration": generation,
            "conditions": conditions,
        }
        new.pop("reason", None)
        new.pop("message", None)
        if meta.get("uid"):
            owned = build.names(ws)
            new["pvcName"] = owned.pvc
            new["podName"] = "" if outcome.phase in ("Suspended", "Failed") else owned.pod
        if outcome.phase == "Failed":
            new["reason"] = "PodBuildFailed"
            new["message"] = outcome.detail
        if not new.get("podName"):
            new.pop("podName", None)
        patch = st.status_patch(old, new)
        if patch is None:
            return
        try:
            await self.kube.patch(
                WORKSPACES, meta["name"], {"status": patch}, meta.get("namespace"), sub="status"
            )
        except NotFound:
            return  # deleted meanwhile: nothing left to describe

    def _now(self) -> str:
        return self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
