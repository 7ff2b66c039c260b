"""The Workspace reconciler: a Workspace key in, the PVC, pod and status brought in line.

Level-based: every reconcile reads the Workspace and its pod from the caches, works out what
should exist, writes the difference and returns a requeue decision. Pod and status decisions
are the pure functions in ``pod``, ``status`` and ``verify``; when to come back without an
event is ``deadlines``.

Write flow: the writes that do not depend on each other run at once (the finalizer, the PVC,
and the service account followed by the pod, which the API server refuses while its account
is missing), then one status write. Expected answers are not failures: an object that already
exists was created by an earlier pass, a stale version means a newer event is on its way, a
missing object or namespace means there is nothing left to do, and a namespace being deleted
refuses new content until the Workspace's own deletion arrives (which then releases the
finalizer as usual). None of them is logged above debug or retried with backoff.

Lifecycle: Pending → Creating → Active; ``spec.suspend`` → Suspending → Suspended (the PVC is
kept; resuming builds a new pod); deletion → Terminating (the pod gets the termination grace,
then the finalizer goes and owner GC removes the PVC); Failed with a reason when the pod
cannot be built. A new ``restartGeneration`` or ``architecture`` recreates the pod.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Final

from controller.settings import WorkspaceSettings
from controller.toolkit.clock import Clock, format_time, utc_now
from controller.toolkit.conditions import find_condition, remove_conditions, set_conditions
from controller.toolkit.events import EventRecorder
from controller.toolkit.finalizers import add_finalizer, has_finalizer, remove_finalizer
from controller.toolkit.status import write_status
from controller.types import (
    Obj,
    ObjectKey,
    ObjectReader,
    Requeue,
    StagingCleanup,
    StagingPass,
    StagingReport,
)
from controller.workspace import deadlines, verify
from controller.workspace import pod as build
from controller.workspace import status as st
from controller.workspace.credentials import desired_password_secret
from controller.workspace.metrics import VerifyMetrics
from wspin.contract import ARTIFACTS
from wspin.logs import fields
from wspin.resources import (
    PODS,
    PVCS,
    SECRETS,
    SERVICE_ACCOUNTS,
    WORKSPACES,
    AlreadyExists,
    Conflict,
    Invalid,
    Kube,
    NamespaceTerminating,
    NotFound,
)

log = logging.getLogger("controller.workspace")

FINALIZER: Final = "workspace.llmsafespaces.dev/finalizer"
"""Held until the pod is gone, so deletion honours the termination grace and is visible
as the Terminating phase."""

VERIFY_FAILURE_REQUEUE: Final = deadlines.VERIFY_FAILURE_RECHECK


@dataclass
class _Outcome:
    phase: st.Phase
    requeue: float | None = None
    """The verify-failure recheck, when one is due."""
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
    staging_due: float | None = None
    """Relay staging's own deadline (seconds)."""


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
        self._superseded: dict[ObjectKey, set[str]] = {}
        """Per Workspace, cached versions this controller's own writes replaced: a reconcile
        that finds one in the cache would act on what it already changed, and the event for
        the newer version is on its way (it reconciles then)."""

    async def reconcile(self, key: ObjectKey) -> Requeue | None:
        ws = self.workspaces.get(key)
        if ws is None:
            self._superseded.pop(key, None)
            return None  # gone: owner GC removes what it owned
        version = str(ws["metadata"].get("resourceVersion", ""))
        if version in self._superseded.get(key, ()):
            return None
        self._superseded.pop(key, None)
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
            self._remember_superseded(key, version, written)

    def _remember_superseded(self, key: ObjectKey, cached: str, written: list[str]) -> None:
        """Every version up to the last one written is stale once the writes went through
        (a write that changed nothing returns the version it found, and sends no event)."""
        if written and written[-1] != cached:
            self._superseded[key] = {cached, *written[:-1]}

    async def _converge(self, ws: Obj, written: list[str]) -> Requeue | None:
        """Finalizer, PVC and the phase's own writes at once, then the status."""
        key = ObjectKey.of(ws)
        try:
            pod_body = build.desired_pod(ws, self.settings)
            pvc_body = build.desired_pvc(ws)
        except build.PodBuildError as err:
            await _together(self._ensure_finalizer(ws, written))
            await self._failed(ws, err, written)
            return None
        suspended = bool((ws.get("spec") or {}).get("suspend"))
        phase = self._suspend(ws) if suspended else self._run(ws, pod_body)
        writes: list[Awaitable[object]] = [self._ensure_finalizer(ws, written), phase]
        if self.pvcs.get(ObjectKey(key.namespace, pvc_body["metadata"]["name"])) is None:
            writes.append(self._create(PVCS, pvc_body))
        try:
            results = await _together(*writes)
        except build.PodBuildError as err:
            await self._failed(ws, err, written)
            return None
        outcome = results[1]
        assert isinstance(outcome, _Outcome)
        await self._write_status(ws, outcome, written)
        # Only after the status records the episode: a failed write then means a retry
        # that finds the episode unrecorded, never a second Event for the same one.
        for failure, episode in outcome.failures:
            await self._report(ws, failure, episode)
        if outcome.error is not None:
            raise outcome.error
        return deadlines.next_requeue(outcome.requeue, outcome.staging_due)

    async def _failed(self, ws: Obj, err: build.PodBuildError, written: list[str]) -> None:
        status = ws.get("status") or {}
        # The message carries the fix too (which flag, value or field to change).
        if (status.get("phase"), status.get("message")) != ("Failed", str(err)):
            log.warning(  # once per cause: the reconciles its own status write brings are quiet
                "workspace pod cannot be built",
                extra=fields(workspace=str(ObjectKey.of(ws)), error=err.message),
            )
        await self._write_status(ws, _Outcome("Failed", detail=str(err)), written)

    # -- phases -----------------------------------------------------------------------------

    async def _run(self, ws: Obj, pod_body: Obj) -> _Outcome:
        """Pending/Creating/Active: make the pod exist, then read its state. Nothing here
        asks to come back while the pod starts or stops: its watch events do that."""
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
                return _Outcome(st.running_phase(None, previous), detail=stale)
        if pod is None:
            outcome = _Outcome(st.running_phase(None, previous))
            # Staged before the pod is built, so its first start finds its relay handoff.
            await self._stage(ws, outcome)
            # The pod's identity first: the API server refuses a pod whose account is missing.
            await self._create(SERVICE_ACCOUNTS, build.desired_service_account(ws))
            # Its credentials next: the kubelet holds a pod whose Secret is missing. Kept when
            # it exists, so a recreated pod keeps its passwords.
            await self._create(SECRETS, desired_password_secret(ws))
            await self._create(PODS, pod_body)
            return outcome
        if st.pod_deleting(pod):
            return _Outcome(
                st.running_phase(pod, previous), detail="waiting for the old pod to stop"
            )
        phase = st.running_phase(pod, previous)
        outcome = _Outcome(phase)
        failure = await self._verify(ws, pod, phase, outcome)
        if failure is not None:
            outcome.requeue = deadlines.VERIFY_FAILURE_RECHECK
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
        outcome.staging_due = report.requeue_after

    async def _suspend(self, ws: Obj) -> _Outcome:
        pod_name = build.names(ws).pod
        pod = self.pods.get(ObjectKey(ws["metadata"].get("namespace", ""), pod_name))
        if pod is None:
            return _Outcome("Suspended")
        if not st.pod_deleting(pod):
            await self._delete_pod(pod)
        return _Outcome("Suspending")

    async def _terminate(self, ws: Obj, written: list[str]) -> None:
        """Stop the pod with the grace, then let the Workspace go. The pod's deletion event
        brings the Workspace back here; nothing is polled meanwhile."""
        if not has_finalizer(ws, FINALIZER):
            return
        namespace = ws["metadata"].get("namespace", "")
        pod_name = build.names(ws).pod if ws["metadata"].get("uid") else ""
        # Read through the API: the cache may lag, and releasing the finalizer too early
        # would cut the pod's grace short through owner GC.
        pod = await self.kube.get_or_none(PODS, pod_name, namespace) if pod_name else None
        if pod is not None:
            if not st.pod_deleting(pod):
                await self._delete_pod(pod)
            await self._write_status(ws, _Outcome("Terminating"), written)
            return
        if isinstance(self.staging, StagingCleanup):
            await self.staging.cleanup(ws)
        if not await remove_finalizer(self.kube, WORKSPACES, ws, FINALIZER):
            return
        log.info("workspace deleted", extra=fields(workspace=str(ObjectKey.of(ws))))

    async def _ensure_finalizer(self, ws: Obj, written: list[str]) -> None:
        if has_finalizer(ws, FINALIZER):
            return
        updated = await add_finalizer(self.kube, WORKSPACES, ws, FINALIZER)
        written.append(str(updated["metadata"].get("resourceVersion", "")))

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

    async def _write_status(self, ws: Obj, outcome: _Outcome, written: list[str]) -> None:
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
        updated = await write_status(self.kube, WORKSPACES, ws, new)
        if updated is not None:
            written.append(str(updated["metadata"].get("resourceVersion", "")))


async def _together(*writes: Awaitable[object]) -> list[object]:
    """Run independent writes at once and wait for all of them (none is left running). Of
    several failures the one that decides what happens next is raised: a namespace being
    deleted or a Workspace gone ends the reconcile quietly, a pod the API server refuses
    fails the Workspace, anything else is retried."""
    results = await asyncio.gather(*writes, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    for decisive in (NamespaceTerminating, NotFound, build.PodBuildError, Conflict):
        for error in errors:
            if isinstance(error, decisive):
                raise error
    if errors:
        raise errors[0]
    return list(results)
