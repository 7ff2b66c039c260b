"""One handler per Workspace phase: each reads the caches, makes the writes its phase needs
and returns an ``Outcome`` (the status to write and what follows it).

Dispatch is by the phase the status records (``run``); deletion is the reconciler's own path.

- Pending, Creating, Active, Resuming, Failed (``running``): a suspend request or a suspended
  organisation stops the pod; otherwise the pod is built, started when missing, replaced when
  stale (once its agent's sessions drained, ``upkeep``), and its facts decide the phase
  (``lifecycle.observe``). Failures are counted and retried with the backoff of their class,
  a pod that does not start is replaced past its threshold, and a pod lost after a failure is
  recreated only once its retry is due (``recovery_report``). An Active pod is also suspended
  when idle or past its lifetime, and replaced when its agent failed its health checks
  (``upkeep``).
- Suspending (``suspending``): the pod is deleted (no drain; its grace bounds this) and the
  Workspace is Suspended once it is gone.
- Suspended (``suspended``): a resume request, or the reactivation of the organisation whose
  suspension stopped it, moves it to Resuming; the next pass builds the pod. One kept past
  ``spec.ttlSecondsAfterSuspended`` is deleted.
- Terminating/Terminated without a deletion (``retired``): the pod is stopped; nothing else.

Every handler consumes the ``spec.suspend`` request it was given (``suspension``). The relay
staging pass runs once per pass in every phase that may hold staged material
(``staging_phases``): before a pod is built, else after the handler.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

from controller.types import Obj, ObjectKey, StagingReport
from controller.workspace.agent import report as agent_report
from controller.workspace.pod import ownership
from controller.workspace.pod.builder import desired_pod, pod_is_stale, restart_generation_of
from controller.workspace.pod.credentials import (
    WorkspaceCredentials,
    derive_credentials,
    pod_credentials,
)
from controller.workspace.pod.facts import pod_facts
from controller.workspace.pod.names import PodBuildError, PodRejected, names
from controller.workspace.pod.phase import (
    POD_BUILD_FAILED,
    observe,
    recycling,
    served_before,
    waiting_phase,
)
from controller.workspace.pod.refusals import (
    ADMISSION_REFUSED,
    POD_ADMITTED,
    PodAdmissionRefused,
    Refusal,
    recorded,
    refused_condition,
    retry_delay,
)
from controller.workspace.pod.storage import claim_conflict, claim_name, desired_pvc
from controller.workspace.reconcile import idle, orgstatus
from controller.workspace.reconcile.deadlines import VERIFY_FAILURE_RECHECK
from controller.workspace.reconcile.deps import ReconcileDeps
from controller.workspace.reconcile.outcome import Notice, Outcome
from controller.workspace.reconcile.owner_record import org_to_check
from controller.workspace.reconcile.staging_phases import stages_in
from controller.workspace.reconcile.suspension import consumed, suspend_request
from controller.workspace.reconcile.upkeep import (
    Gate,
    expire,
    hold_recycle,
    kept_reason,
    suspended_notice,
    upkeep,
)
from controller.workspace.recovery.episodes import new_episode
from wspin.core.kinds import PVCS
from wspin.core.logs import fields
from wspin.core.namespaces import excluded_namespace_problem
from wspin.core.runtimes import Runtime, resolve_runtime
from wspin.core.tenancy import runtime_class_problem

log = logging.getLogger("controller.workspace")

RUNTIME_NOT_FOUND: Final = "RuntimeNotFound"
"""Ready reason while a bare ``spec.runtime`` names no (runnable) RuntimeEnvironment."""
ORG_SUSPENDED: Final = "OrgSuspended"
"""Ready reason and Event of a Workspace stopped because its organisation is suspended."""

Handler = Callable[[ReconcileDeps, Obj], Awaitable[Outcome]]


runtimes: Mapping[str, Obj] | None


async def run(deps: ReconcileDeps, ws: Obj) -> Outcome:
    """The handler of ``ws``'s phase; the suspend request it acted on is marked consumed."""
    previous = str((ws.get("status") or {}).get("phase") or "")
    handler = _HANDLERS.get(previous, running)
    outcome = await handler(deps, ws)
    request = suspend_request(ws)
    if consumed(previous, request):
        outcome.consume = request
    return outcome


# -- the phases ---------------------------------------------------------------------


async def running(deps: ReconcileDeps, ws: Obj) -> Outcome:
    """Pending, Creating, Active, Resuming, Failed: the pod should run."""
    if suspend_request(ws) is True:
        return await _stop(deps, ws)
    org = await _org_verdict(deps, ws)
    if org is not None and org.suspended:
        outcome = await _stop(deps, ws, ORG_SUSPENDED, org.detail)
    else:
        try:
            outcome = await _run_pod(deps, ws)
        except PodBuildError as err:
            outcome = _failed(deps, ws, err)
    if org is not None:
        outcome.due(org.recheck)
    if not any(c.get("type") == POD_ADMITTED for c in outcome.conditions):
        outcome.remove = (*outcome.remove, POD_ADMITTED)  # no refusal (any more)
    return outcome


async def suspending(deps: ReconcileDeps, ws: Obj) -> Outcome:
    """Stop the pod; Suspended once it is gone (its deletion event brings us back)."""
    status = ws.get("status") or {}
    if status.get("reason") == ORG_SUSPENDED and suspend_request(ws) is not True:
        return await _stop(deps, ws, ORG_SUSPENDED, str(status.get("message") or ""))
    kept = kept_reason(status)
    if kept is not None and suspend_request(ws) is not True:
        return await _stop(deps, ws, *kept)
    return await _stop(deps, ws)


async def suspended(deps: ReconcileDeps, ws: Obj) -> Outcome:
    """Stay Suspended until a resume request, or until the organisation whose suspension
    stopped the Workspace is active again; a suspend request makes it the user's own
    suspension (the organisation's reactivation then leaves it suspended)."""
    request = suspend_request(ws)
    by_org = (ws.get("status") or {}).get("reason") == ORG_SUSPENDED
    if request is True or not (request is False or by_org):
        kept = kept_reason(ws.get("status") or {}) if request is None else None
        stay = Outcome("Suspended", reason=kept[0], detail=kept[1]) if kept else None
        stay = stay or Outcome("Suspended")
        return await expire(deps, ws, stay)
    org = await _org_verdict(deps, ws)
    if org is not None and org.suspended:
        outcome = Outcome("Suspended", reason=ORG_SUSPENDED, detail=org.detail)
        outcome.due(org.recheck)
        return outcome
    log.info("resuming workspace", extra=fields(workspace=str(ObjectKey.of(ws))))
    return Outcome("Resuming")


async def retired(deps: ReconcileDeps, ws: Obj) -> Outcome:
    """Terminating or Terminated without a deletion: the pod is stopped, nothing else (a
    Workspace kept past its TTL keeps saying so)."""
    pod = _own_pod(deps, ws, strict=False)
    if pod is None:
        status = ws.get("status") or {}
        if status.get("reason") == idle.TTL_EXPIRED:
            return Outcome(
                "Terminated", reason=idle.TTL_EXPIRED, detail=str(status.get("message") or "")
            )
        return Outcome("Terminated")
    if not pod_facts(pod).deleting:
        await deps.writes.delete_pod(pod)
    return Outcome("Terminating")


# -- the pod --------------------------------------------------------------------------


async def _run_pod(deps: ReconcileDeps, ws: Obj) -> Outcome:
    """Build the pod (and its volume), then start, replace or observe it."""
    key = ObjectKey.of(ws)
    excluded = excluded_namespace_problem(key.namespace, deps.settings.excluded_namespaces)
    if excluded:
        # Not a workspace namespace: nothing is ever staged for it.
        outcome = _failed(deps, ws, PodBuildError(excluded))
        outcome.staged = True
        return outcome
    # The webhook refuses such a Workspace; checked again here, as the namespace's label or
    # the allow list may have changed since it was admitted.
    gated = runtime_class_problem(
        (ws.get("spec") or {}).get("runtimeClass"),
        key.namespace,
        _labels(deps, key.namespace),
        deps.settings.allowed_runtime_classes,
    )
    if gated:
        return _failed(deps, ws, PodBuildError(gated))
    runtime = _runtime(deps, ws)
    if isinstance(runtime, str):
        return _runtime_missing(deps, ws, runtime)
    owned = names(ws)
    cutoff = deps.writes.legacy_before
    legacy = deps.pvcs.get(ObjectKey(key.namespace, owned.legacy_pvc))
    claim = claim_name(ws, legacy, legacy_before=cutoff)
    credentials = derive_credentials(deps.keys, ws)
    body = desired_pod(ws, deps.settings, credentials=credentials, runtime=runtime, claim=claim)
    pvc = deps.pvcs.get(ObjectKey(key.namespace, claim))
    found = claim_conflict(pvc, ws, legacy_before=cutoff)
    if found is not None:
        raise ownership.ForeignObject(found)
    # The former name's claim is held to its uid (``storage``); the new name's to its label.
    claim_uid = str(pvc["metadata"].get("uid") or "") if pvc and claim != owned.pvc else ""
    if pvc is None:
        # Created (or found foreign) before the pod that mounts it: a pod must never
        # start on a claim someone else put at our name.
        try:
            await deps.writes.create(PVCS, desired_pvc(ws, claim), ws)
        except PodAdmissionRefused as refused:
            waiting = Outcome(waiting_phase(str((ws.get("status") or {}).get("phase") or "")))
            await _refused(deps, ws, waiting, refused.refusal)
            return waiting
    outcome = await _pod(deps, ws, body, credentials)
    outcome.claim, outcome.claim_uid = claim, claim_uid
    if outcome.restart_generation is None:  # else: a drain holds the pod it was built for
        outcome.restart_generation = int(restart_generation_of(ws))
    return outcome


async def _pod(
    deps: ReconcileDeps, ws: Obj, body: Obj, credentials: WorkspaceCredentials
) -> Outcome:
    previous = str((ws.get("status") or {}).get("phase") or "")
    pod = _own_pod(deps, ws, strict=True)
    facts = pod_facts(pod) if pod is not None else None
    gate, held = Gate(), None
    if pod is not None and facts is not None and not facts.deleting:
        stale = pod_is_stale(pod, ws)
        held = pod_credentials(pod, ws, deps.keys) if stale is None else None
        untrusted = held if isinstance(held, str) else None
        why = stale or untrusted
        if why is not None and not facts.terminal:
            # A recycle the controller starts waits for the agent's sessions (drain).
            gate = await hold_recycle(deps, ws, pod, facts, previous, untrusted=bool(untrusted))
            why = None if gate.hold else why
        if why is not None or facts.terminal:
            log.info(
                "recreating workspace pod",
                extra=fields(workspace=str(ObjectKey.of(ws)), why=why or facts.reason),
            )
            await deps.writes.delete_pod(pod)
            if why is None:
                outcome = Outcome.observed(observe(facts, previous), pod_name=facts.name)
                await deps.recovery.assess(
                    ws, pod, facts, outcome, previous=previous, credentials=credentials
                )
                return outcome
            recycled = Outcome.observed(
                recycling(previous, why), pod_name=facts.name, restarted=bool(untrusted)
            )
            recycled.notices += gate.notices
            return recycled
    if pod is None:
        outcome = Outcome.observed(observe(None, previous))
        if deps.recovery.missing(ws, outcome, previous):
            return outcome  # the retry after a failure is not due yet
        # Staged before the pod is built, so its first start finds its relay handoff.
        await stage(deps, ws, outcome)
        try:
            await deps.writes.start_pod(ws, body, credentials)
        except PodAdmissionRefused as refused:
            await _refused(deps, ws, outcome, refused.refusal)
            return outcome
        outcome.pod_name = body["metadata"]["name"]
        return outcome
    assert facts is not None
    served = served_before(ws.get("status") or {}, facts)
    outcome = Outcome.observed(
        observe(facts, previous, served=served), pod=facts, pod_name=facts.name
    )
    verify_failed = False
    if not facts.deleting and await deps.verifier.check(ws, pod, outcome.phase, outcome):
        verify_failed = True
        outcome.due(VERIFY_FAILURE_RECHECK)
    if await deps.recovery.assess(
        ws,
        pod,
        facts,
        outcome,
        previous=previous,
        credentials=credentials,
        verify_failed=verify_failed,
    ):
        log.info(
            "replacing a workspace pod that does not start",
            extra=fields(workspace=str(ObjectKey.of(ws)), reason=outcome.reason),
        )
        await deps.writes.delete_pod(pod)
        return outcome
    kept = await upkeep(deps, ws, pod, facts, outcome, held, gate)
    if isinstance(kept, idle.AutoSuspend):
        stopped = await _stop(deps, ws, kept.reason, kept.message)
        stopped.notices.append(suspended_notice(kept))
        return stopped
    return kept


async def _stop(deps: ReconcileDeps, ws: Obj, reason: str = "", detail: str = "") -> Outcome:
    """Delete the pod (no drain: the termination grace bounds it); Suspended once gone."""
    pod = _own_pod(deps, ws, strict=False)
    if pod is None:
        return Outcome("Suspended", reason=reason, detail=detail)
    if not pod_facts(pod).deleting:
        await deps.writes.delete_pod(pod)
    return Outcome("Suspending", reason=reason, detail=detail, pod_name=names(ws).pod)


def _own_pod(deps: ReconcileDeps, ws: Obj, *, strict: bool) -> Obj | None:
    """The cached pod at the Workspace's pod name if it is the Workspace's. Someone else's
    pod raises ``ForeignObject`` (``strict``: the Workspace cannot run beside it) or reads
    as no pod (stopping: it was never ours to stop)."""
    if not ws["metadata"].get("uid"):
        return None
    pod = deps.pods.get(ObjectKey(ws["metadata"].get("namespace", ""), names(ws).pod))
    if strict:
        deps.writes.check(pod, ws, "Pod")
    elif deps.writes.conflict(pod, ws, "Pod") is not None:
        return None
    return pod


async def stage(deps: ReconcileDeps, ws: Obj, outcome: Outcome) -> None:
    """Run the relay staging pass, when armed and ``outcome``'s phase stages (every phase
    that may hold staged material: ``staging_phases``), once per reconcile, and fold its
    report into ``outcome``."""
    if deps.staging is None or outcome.staged or not stages_in(outcome.phase):
        return
    outcome.staged = True
    # Staging decides on what the pod applied: agentd's latest report, before it is written.
    report = await deps.staging.run(agent_report.with_delivery(ws, outcome.agent))
    if isinstance(report, list):
        report = StagingReport(report)
    outcome.conditions += report.conditions
    outcome.remove = (*outcome.remove, *report.remove)
    outcome.error = report.error
    outcome.staging_due = report.requeue_after


# -- causes ---------------------------------------------------------------------------


def _failed(deps: ReconcileDeps, ws: Obj, err: PodBuildError) -> Outcome:
    """Phase Failed, counted as a Configuration failure: a pod the API server rejected is
    sent again once the class's backoff has passed (an admission policy or a quota may
    change meanwhile), one the builder refuses as soon as its cause is gone."""
    status = ws.get("status") or {}
    # The message carries the fix too (which flag, value or field to change).
    said = str(status.get("message") or "")
    if status.get("phase") != "Failed" or not said.startswith(str(err)):
        log.warning(  # once per cause: the reconciles its own status write brings are quiet
            "workspace pod cannot be built",
            extra=fields(workspace=str(ObjectKey.of(ws)), error=err.message),
        )
    outcome = Outcome(
        "Failed", reason=POD_BUILD_FAILED, detail=str(err), failure_reason=POD_BUILD_FAILED
    )
    deps.recovery.build_failed(ws, outcome, str(err), rejected=isinstance(err, PodRejected))
    return outcome


async def _refused(deps: ReconcileDeps, ws: Obj, outcome: Outcome, refusal: Refusal) -> None:
    """Admission refused the pod: ``PodAdmitted=False`` and Ready=False naming who and
    why, a retry after a delay growing with the episode, and for a new episode one log
    line now and one Warning Event once the status records it (``refusals``)."""
    generation = int(ws["metadata"].get("generation") or 0)
    found = refused_condition(refusal, generation)
    conditions = (ws.get("status") or {}).get("conditions") or []
    outcome.conditions.append(found)
    outcome.reason, outcome.detail = ADMISSION_REFUSED, str(found["message"])
    outcome.due(retry_delay(conditions, deps.clock()))
    if await new_episode(deps.kube, ws, recorded(refusal)):
        log.warning(
            "admission refused the workspace pod; retrying",
            extra=fields(
                workspace=str(ObjectKey.of(ws)),
                reason=refusal.reason,
                by=refusal.by,
                error=found["message"],
            ),
        )
        outcome.notices.append(Notice("Warning", refusal.reason, str(found["message"])))


def _runtime(deps: ReconcileDeps, ws: Obj) -> Runtime | str | None:
    """The RuntimeEnvironment a bare ``spec.runtime`` names, why it names none, or None for
    an image reference (the pod runs it as written)."""
    runtime = (ws.get("spec") or {}).get("runtime")
    if deps.runtimes is None or not isinstance(runtime, str) or "/" in runtime:
        return None
    return resolve_runtime(runtime, deps.runtimes)


def _runtime_missing(deps: ReconcileDeps, ws: Obj, problem: str) -> Outcome:
    """Ready=False RuntimeNotFound; a running pod is left as it is (it was built from an
    entry that was valid then), no new pod is built. The catalogue's watch brings the
    Workspace back when the entry appears."""
    previous = str((ws.get("status") or {}).get("phase") or "")
    pod = _own_pod(deps, ws, strict=False)
    facts = pod_facts(pod) if pod is not None else None
    outcome = Outcome.observed(
        observe(facts, previous), pod=facts, pod_name=facts.name if facts else ""
    )
    if facts is None:
        outcome.phase = waiting_phase(previous)
    outcome.reason, outcome.detail, outcome.failure_reason = RUNTIME_NOT_FOUND, problem, ""
    return outcome


def _labels(deps: ReconcileDeps, namespace: str) -> Mapping[str, str]:
    return deps.namespaces.of(namespace) if deps.namespaces is not None else {}


async def _org_verdict(deps: ReconcileDeps, ws: Obj) -> orgstatus.OrgVerdict | None:
    """Whether the Workspace's organisation is suspended, when the API service is
    configured; None otherwise. The organisation is the vouched owner's
    (``owner_record.org_to_check``), else the namespace's ``llmsafespaces.dev/org`` label:
    ``spec.owner.orgID`` as it stands is never read. Unknown status never suspends."""
    org_id = org_to_check(ws, _labels(deps, str(ws["metadata"].get("namespace", ""))))
    if deps.orgs is None or org_id is None:
        return None
    return await orgstatus.verdict(deps.orgs, org_id)


_HANDLERS: Final[dict[str, Handler]] = {
    "Suspending": suspending,
    "Suspended": suspended,
    "Terminating": retired,
    "Terminated": retired,
}
