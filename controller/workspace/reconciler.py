"""The Workspace reconciler: a Workspace key in, the PVC, pod and status brought in line.

Level-based: every reconcile reads the Workspace and its pod from the caches,
works out what should exist, writes the difference and returns a requeue decision. Pod and
status decisions are the pure functions in ``pod``, ``status`` and ``verify``.

Lifecycle: Pending → Creating → Active; ``spec.suspend`` → Suspending → Suspended (the PVC is
kept; resuming builds a new pod); deletion → Terminating (the pod gets the termination grace,
then the finalizer goes and owner GC removes the PVC); Failed with a reason when the pod
cannot be built. A new ``restartGeneration`` or ``architecture`` recreates the pod.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

from controller.settings import WorkspaceSettings
from controller.toolkit.clock import Clock, format_time, utc_now
from controller.toolkit.conditions import find_condition, remove_conditions, set_conditions
from controller.toolkit.events import EventRecorder
from controller.toolkit.finalizers import add_finalizer, has_finalizer, remove_finalizer
from controller.toolkit.status import write_status
from controller.types import Obj, ObjectKey, ObjectReader, Requeue
from controller.workspace import pod as build
from controller.workspace import status as st
from controller.workspace import verify
from controller.workspace.metrics import VerifyMetrics
from wspin.contract import ARTIFACTS
from wspin.logs import fields
from wspin.resources import (
    PODS,
    PVCS,
    SERVICE_ACCOUNTS,
    WORKSPACES,
    AlreadyExists,
    Invalid,
    Kube,
)

log = logging.getLogger("controller.workspace")

FINALIZER: Final = "workspace.llmsafespaces.dev/finalizer"
"""Held until the pod is gone, so deletion honours the termination grace and is visible
as the Terminating phase."""

# While something is in motion (pod starting or stopping) come back soon; the pod watch
# usually triggers earlier.
PROGRESS_REQUEUE: Final = 2.0
# A verify failure is handled, not retried: the pod crash-loops on its own and a faster
# requeue would only spin.
VERIFY_FAILURE_REQUEUE: Final = 300.0


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
    failures: list[tuple[verify.VerifyFailure, str]] = field(default_factory=list)
    """Verify failures starting a new episode, with the episode's name (the pod and the
    failure): reported once the status records them."""
    remove: tuple[str, ...] = ()
    """Condition types to drop (relay staging causes that went away)."""
    error: Exception | None = None
    """Raised once the status is written (relay staging incomplete)."""


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
        clock: Clock = utc_now,
        events: EventRecorder | None = None,
    ) -> None:
        self.kube = kube
        self.workspaces = workspaces
        self.pods = pods
        self.pvcs = pvcs
        self.settings = settings
        self.metrics = metrics
        self.staging = staging
        self.clock = clock
        self.events = events or EventRecorder(kube, clock=clock)

    async def reconcile(self, key: ObjectKey) -> Requeue | None:
        ws = self.workspaces.get(key)
        if ws is None:
            return None  # gone: owner GC removes what it owned
        if ws["metadata"].get("deletionTimestamp"):
            return await self._terminate(ws)
        ws = await add_finalizer(self.kube, WORKSPACES, ws, FINALIZER)
        try:
            pod_body = build.desired_pod(ws, self.settings)
            pvc_body = build.desired_pvc(ws)
            if self.pvcs.get(ObjectKey(key.namespace, pvc_body["metadata"]["name"])) is None:
                await self._create(PVCS, pvc_body)
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
        await self._write_status(ws, outcome)
        # Only after the status records the episode: a failed write then means a retry
        # that finds the episode unrecorded, never a second Event for the same one.
        for failure, episode in outcome.failures:
            await self._report(ws, failure, episode)
        if outcome.error is not None:
            raise outcome.error
        return Requeue(outcome.requeue) if outcome.requeue is not None else None

    # -- phases -----------------------------------------------------------------------------

    async def _run(self, ws: Obj, pod_body: Obj) -> _Outcome:
        """Pending/Creating/Active: make the pod exist, then read its state."""
        key = ObjectKey.of(ws)
        previous = str((ws.get("status") or {}).get("phase") or "")
        pod = self.pods.get(ObjectKey(key.namespace, pod_body["metadata"]["name"]))
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
            await self._create(SERVICE_ACCOUNTS, build.desired_service_account(ws))
            await self._create(PODS, pod_body)
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
        if not st.pod_deleting(pod):
            await self._delete_pod(pod)
        return _Outcome("Suspending", PROGRESS_REQUEUE)

    async def _terminate(self, ws: Obj) -> Requeue | None:
        """Stop the pod with the grace, then let the Workspace go."""
        if not has_finalizer(ws, FINALIZER):
            return None
        namespace = ws["metadata"].get("namespace", "")
        pod_name = build.names(ws).pod if ws["metadata"].get("uid") else ""
        # Read through the API: the cache may lag, and releasing the finalizer too early
        # would cut the pod's grace short through owner GC.
        pod = await self.kube.get_or_none(PODS, pod_name, namespace) if pod_name else None
        if pod is not None:
            if not st.pod_deleting(pod):
                await self._delete_pod(pod)
            await self._write_status(ws, _Outcome("Terminating", PROGRESS_REQUEUE))
            return Requeue(PROGRESS_REQUEUE)
        if isinstance(self.staging, StagingCleanup):
            await self.staging.cleanup(ws)
        if not await remove_finalizer(self.kube, WORKSPACES, ws, FINALIZER):
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
                    episode = f"{pod['metadata'].get('uid', '')}/{failure.kind.reason}"
                    outcome.failures.append((failure, episode))
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
            old = find_condition(conditions, type_)
            return bool(old and old["status"] == "False" and old["reason"] == failure.kind.reason)

        if recorded(current):
            return False
        meta = ws["metadata"]
        live = await self.kube.get_or_none(WORKSPACES, meta["name"], meta.get("namespace"))
        return live is not None and not recorded((live.get("status") or {}).get("conditions") or [])

    async def _report(self, ws: Obj, failure: verify.VerifyFailure, episode: str) -> None:
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
        await self.events.emit(
            ws,
            WORKSPACES,
            "Warning",
            failure.kind.reason,
            verify.event_message(failure),
            episode=episode,
        )

    # -- writes -----------------------------------------------------------------------------

    async def _create(self, resource: Any, body: Obj) -> None:
        """Create ``body``; a 422 becomes PodBuildError (phase Failed with the API server's
        reason): the same body is refused every time, so retrying with backoff would only
        leave the Workspace Pending with no word on why. A spec edit or a controller restart
        with corrected flags reconciles it again."""
        try:
            await self.kube.create(resource, body, body["metadata"]["namespace"])
        except AlreadyExists:
            pass  # the cache lags behind our own create
        except Invalid as err:
            raise build.PodBuildError(
                f"the API server rejected the {body.get('kind', 'object')}: {err.message}"
            ) from err

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
        ready = st.ready_condition(outcome.phase, generation, outcome.detail)
        conditions = set_conditions(
            old.get("conditions") or [], [ready, *outcome.conditions], format_time(self.clock())
        )
        conditions = remove_conditions(conditions, outcome.remove)
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
        await write_status(self.kube, WORKSPACES, ws, new)
