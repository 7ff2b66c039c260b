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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from controller.settings import WorkspaceSettings
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
from controller.workspace import deadlines, orgstatus, ownership, verify
from controller.workspace import pod as build
from controller.workspace import status as st
from controller.workspace.credentials import desired_password_secret
from controller.workspace.egress_sync import EgressPolicies
from controller.workspace.metrics import VerifyMetrics
from controller.workspace.staging_phases import stages_in
from wspin.core.clock import Clock, format_time, utc_now
from wspin.core.contract import ARTIFACTS
from wspin.core.errors import AlreadyExists, Conflict, Invalid, NamespaceTerminating, NotFound
from wspin.core.kinds import PODS, PVCS, SECRETS, SERVICE_ACCOUNTS, WORKSPACES
from wspin.core.logs import fields
from wspin.core.namespaces import excluded_namespace_problem
from wspin.core.runtimes import Runtime, resolve_runtime
from wspin.core.tenancy import NamespaceLabels, org_of, runtime_class_problem
from wspin.kube.client import Kube

log = logging.getLogger("controller.workspace")

FINALIZER: Final = "workspace.llmsafespaces.dev/finalizer"
"""Held until the pod is gone, so deletion honours the termination grace and is visible
as the Terminating phase."""

RUNTIME_NOT_FOUND: Final = "RuntimeNotFound"
"""Ready reason while a bare ``spec.runtime`` names no (runnable) RuntimeEnvironment."""
ORG_SUSPENDED: Final = "OrgSuspended"
"""Ready reason and Event of a Workspace stopped because its organisation is suspended."""

VERIFY_FAILURE_REQUEUE: Final = deadlines.VERIFY_FAILURE_RECHECK
CONFLICT_REQUEUE: Final = 30.0
"""Seconds between looks at a foreign object blocking the Workspace: removing one that
carries no workspace labels raises no event in our caches."""


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
    staged: bool = False
    """The staging pass already ran for this reconcile (before the pod was built)."""
    reason: str = ""
    """The Ready reason, when it is not the phase's own (an organisation's suspension)."""


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
        orgs: orgstatus.OrgStatusCache | None = None,
        runtimes: Mapping[str, Obj] | None = None,
        egress: EgressPolicies | None = None,
        namespaces: NamespaceLabels | None = None,
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
        self.orgs = orgs
        self.runtimes = runtimes
        self.namespaces = namespaces
        """The platform's labels on each Namespace (a watch): the runtime-class override and
        the organisation come from them, never from the Workspace (None: no labels)."""
        """The runtime catalogue (RuntimeEnvironments by name) bare runtime names resolve
        through; None: every ``spec.runtime`` is run as written."""
        self.egress = egress
        """Per-Workspace egress policies (None: ``--workspace-egress=off``)."""
        """Org status from the API service (None: ``--api-service-url`` or the internal
        token not set): an org-owned Workspace of a suspended organisation is suspended."""
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
            excluded = excluded_namespace_problem(key.namespace, self.settings.excluded_namespaces)
            if excluded:
                # Not a workspace namespace: nothing is ever staged for it.
                await _together(self._ensure_finalizer(ws, written))
                return await self._failed(ws, build.PodBuildError(excluded), written, stage=False)
            # The webhook refuses such a Workspace; checked again here, as the label or the
            # allow list may have changed since it was admitted.
            gated = runtime_class_problem(
                (ws.get("spec") or {}).get("runtimeClass"),
                key.namespace,
                self._labels(key.namespace),
                self.settings.allowed_runtime_classes,
            )
            if gated:
                raise build.PodBuildError(gated)
            runtime = self._runtime(ws)
            if isinstance(runtime, str):
                return await self._runtime_missing(ws, runtime, written)
            pod_body = build.desired_pod(ws, self.settings, runtime=runtime)
            pvc_body = build.desired_pvc(ws)
        except build.PodBuildError as err:
            await _together(self._ensure_finalizer(ws, written))
            return await self._failed(ws, err, written)
        suspended = bool((ws.get("spec") or {}).get("suspend"))
        org = None if suspended else await self._org_suspension(ws)

        def phase() -> Awaitable[_Outcome]:
            if suspended or (org is not None and org.suspended):
                return self._suspend(ws, org.detail if org is not None else "")
            return self._run(ws, pod_body)

        # The egress policy goes first, so a new pod never starts with open egress.
        egress = await self.egress.ensure(ws) if self.egress is not None else None
        try:
            pvc = self.pvcs.get(ObjectKey(key.namespace, pvc_body["metadata"]["name"]))
            ownership.check_owned(pvc, ws, "PersistentVolumeClaim")
            # A PVC not in the cache is created (or found foreign) before the pod that mounts
            # it: a pod must never start on a claim someone else put at our name.
            step = phase() if pvc is not None else self._claim_then(PVCS, pvc_body, ws, phase)
            results = await _together(self._ensure_finalizer(ws, written), step)
        except build.PodBuildError as err:
            return await self._failed(ws, err, written)
        except ownership.ForeignObject as foreign:
            return await self._conflict(ws, foreign.conflict, written)
        outcome = results[1]
        assert isinstance(outcome, _Outcome)
        if org is not None and org.suspended:
            outcome.reason = ORG_SUSPENDED
        if egress is not None:
            outcome.conditions.append(egress.condition)
        await self._stage(ws, outcome)
        await self._write_status(ws, outcome, written)
        if (
            outcome.reason == ORG_SUSPENDED
            and (ws.get("status") or {}).get("reason") != ORG_SUSPENDED
        ):
            await self.events.emit(ws, WORKSPACES, "Warning", ORG_SUSPENDED, outcome.detail)
        # Only after the status records the episode: a failed write then means a retry
        # that finds the episode unrecorded, never a second Event for the same one.
        for failure, episode in outcome.failures:
            await self._report(ws, failure, episode)
        if outcome.error is not None:
            raise outcome.error
        return deadlines.next_requeue(
            outcome.requeue,
            outcome.staging_due,
            org.recheck if org is not None else None,
            egress.requeue if egress is not None else None,
        )

    def _runtime(self, ws: Obj) -> Runtime | str | None:
        """The RuntimeEnvironment a bare ``spec.runtime`` names, why it names none, or None for
        an image reference (the pod runs it as written)."""
        runtime = (ws.get("spec") or {}).get("runtime")
        if self.runtimes is None or not isinstance(runtime, str) or "/" in runtime:
            return None
        return resolve_runtime(runtime, self.runtimes)

    async def _runtime_missing(self, ws: Obj, problem: str, written: list[str]) -> Requeue | None:
        """Ready=False RuntimeNotFound; a running pod is left as it is (it was built from an
        entry that was valid then), no new pod is built. The catalogue's watch brings the
        Workspace back when the entry appears."""
        key = ObjectKey.of(ws)
        pod = (
            self.pods.get(ObjectKey(key.namespace, build.names(ws).pod))
            if ws["metadata"].get("uid")
            else None
        )
        if ownership.conflict_of(pod, ws, "Pod") is not None:
            pod = None  # someone else's pod says nothing about this Workspace
        previous = str((ws.get("status") or {}).get("phase") or "")
        phase = st.running_phase(pod, previous) if pod is not None else "Pending"
        await _together(self._ensure_finalizer(ws, written))
        outcome = _Outcome(phase, detail=problem, reason=RUNTIME_NOT_FOUND)
        await self._stage(ws, outcome)
        await self._write_status(ws, outcome, written)
        return _staging_requeue(outcome)

    def _labels(self, namespace: str) -> Mapping[str, str]:
        return self.namespaces.of(namespace) if self.namespaces is not None else {}

    async def _org_suspension(self, ws: Obj) -> orgstatus.OrgVerdict | None:
        """Whether the organisation of the Workspace's namespace (its ``llmsafespaces.dev/org``
        label: ``spec.owner.orgID`` is the tenant's own word) is suspended, when the API service
        is configured; None otherwise. Unknown status never suspends."""
        org_id = org_of(self._labels(str(ws["metadata"].get("namespace", ""))))
        if self.orgs is None or org_id is None:
            return None
        return await orgstatus.verdict(self.orgs, org_id)

    async def _failed(
        self, ws: Obj, err: build.PodBuildError, written: list[str], *, stage: bool = True
    ) -> Requeue | None:
        status = ws.get("status") or {}
        # The message carries the fix too (which flag, value or field to change).
        if (status.get("phase"), status.get("message")) != ("Failed", str(err)):
            log.warning(  # once per cause: the reconciles its own status write brings are quiet
                "workspace pod cannot be built",
                extra=fields(workspace=str(ObjectKey.of(ws)), error=err.message),
            )
        outcome = _Outcome("Failed", detail=str(err), staged=not stage)
        await self._stage(ws, outcome)
        await self._write_status(ws, outcome, written)
        return _staging_requeue(outcome)

    # -- phases -----------------------------------------------------------------------------

    async def _run(self, ws: Obj, pod_body: Obj) -> _Outcome:
        """Pending/Creating/Active: make the pod exist, then read its state. Nothing here
        asks to come back while the pod starts or stops: its watch events do that."""
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
                return _Outcome(st.running_phase(None, previous), detail=stale)
        if pod is None:
            outcome = _Outcome(st.running_phase(None, previous))
            # Staged before the pod is built, so its first start finds its relay handoff.
            await self._stage(ws, outcome)
            # The pod's identity first: the API server refuses a pod whose account is missing.
            await self._create(SERVICE_ACCOUNTS, build.desired_service_account(ws), ws)
            # Its credentials next: the kubelet holds a pod whose Secret is missing. Kept when
            # it exists, so a recreated pod keeps its passwords; never read back, so its owner
            # is not checked (that would need read access to every Secret in the cluster).
            await self._create(SECRETS, desired_password_secret(ws), ws, check_owner=False)
            await self._create(PODS, pod_body, ws)
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
        return outcome

    async def _stage(self, ws: Obj, outcome: _Outcome) -> None:
        """Run the relay staging pass, when armed and ``outcome``'s phase stages (every phase
        that may hold staged material: ``staging_phases``), once per reconcile, and fold its
        report into ``outcome``."""
        if self.staging is None or outcome.staged or not stages_in(outcome.phase):
            return
        outcome.staged = True
        report = await self.staging.run(ws)
        if isinstance(report, list):
            report = StagingReport(report)
        outcome.conditions += report.conditions
        outcome.remove = (*outcome.remove, *report.remove)
        outcome.error = report.error
        outcome.staging_due = report.requeue_after

    async def _suspend(self, ws: Obj, detail: str = "") -> _Outcome:
        pod_name = build.names(ws).pod
        pod = self.pods.get(ObjectKey(ws["metadata"].get("namespace", ""), pod_name))
        if pod is None:
            return _Outcome("Suspended", detail=detail)
        ownership.check_owned(pod, ws, "Pod")
        if not st.pod_deleting(pod):
            await self._delete_pod(pod)
        return _Outcome("Suspending", detail=detail)

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
        # A foreign pod at our name is left alone: it was never ours to stop.
        if pod is not None and ownership.conflict_of(pod, ws, "Pod") is None:
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

    async def _create(self, resource: Any, body: Obj, ws: Obj, *, check_owner: bool = True) -> None:
        """Create ``body``; a 422 becomes PodBuildError (phase Failed with the API server's
        reason): the same body is refused every time, so retrying with backoff would only
        leave the Workspace Pending with no word on why. A spec edit or a controller restart
        with corrected flags reconciles it again.

        AlreadyExists is our own earlier create (the cache lags) or someone else's object at
        our name (the caches hold only labelled objects): it is read live, and
        ``ForeignObject`` raised unless the Workspace controls it."""
        meta = ownership.stamp(body, ws)["metadata"]
        try:
            await self.kube.create(resource, body, meta["namespace"])
        except AlreadyExists:
            if not check_owner:
                return
            live = await self.kube.get_or_none(resource, meta["name"], meta["namespace"])
            ownership.check_owned(live, ws, str(body.get("kind") or resource.kind))
        except Invalid as err:
            raise build.PodBuildError(
                f"the API server rejected the {body.get('kind', 'object')}: {err.message}"
            ) from err

    async def _claim_then(
        self, resource: Any, body: Obj, ws: Obj, then: Callable[[], Awaitable[_Outcome]]
    ) -> _Outcome:
        await self._create(resource, body, ws)
        return await then()

    async def _conflict(
        self, ws: Obj, found: ownership.Conflict, written: list[str]
    ) -> Requeue | None:
        """Report a foreign object: phase Pending (never Active), Ready=False PodConflict
        naming it, one Warning Event per episode; the object itself is not touched."""
        if ownership.new_episode((ws.get("status") or {}).get("conditions") or [], found):
            log.warning(
                "workspace blocked by a foreign object",
                extra=fields(workspace=str(ObjectKey.of(ws)), kind=found.kind, name=found.name),
            )
            await self.events.emit(
                ws,
                WORKSPACES,
                "Warning",
                ownership.CONFLICT_REASON,
                found.message,
                episode=f"{found.kind}/{found.name}/{found.holder}",
            )
        generation = int(ws["metadata"].get("generation") or 0)
        outcome = _Outcome("Pending", detail=found.message)
        outcome.conditions.append(ownership.conflict_condition(found, generation))
        await self._stage(ws, outcome)
        await self._write_status(ws, outcome, written)
        outcome.requeue = CONFLICT_REQUEUE
        return _staging_requeue(outcome)

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
        ready = st.ready_condition(outcome.phase, generation, outcome.detail, outcome.reason)
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
        elif outcome.reason:
            new["reason"] = outcome.reason
            new["message"] = outcome.detail
        if not new.get("podName"):
            new.pop("podName", None)
        updated = await write_status(self.kube, WORKSPACES, ws, new)
        if updated is not None:
            written.append(str(updated["metadata"].get("resourceVersion", "")))


def _staging_requeue(outcome: _Outcome) -> Requeue | None:
    """After a status write: the staging pass's error (retry with backoff), else the earliest
    of the outcome's own deadline and the pass's."""
    if outcome.error is not None:
        raise outcome.error
    return deadlines.next_requeue(outcome.requeue, outcome.staging_due)


async def _together(*writes: Awaitable[object]) -> list[object]:
    """Run independent writes at once and wait for all of them (none is left running). Of
    several failures the one that decides what happens next is raised: a namespace being
    deleted or a Workspace gone ends the reconcile quietly, a pod the API server refuses
    fails the Workspace, anything else is retried."""
    results = await asyncio.gather(*writes, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    for decisive in (
        NamespaceTerminating,
        NotFound,
        build.PodBuildError,
        ownership.ForeignObject,
        Conflict,
    ):
        for error in errors:
            if isinstance(error, decisive):
                raise error
    if errors:
        raise errors[0]
    return list(results)
