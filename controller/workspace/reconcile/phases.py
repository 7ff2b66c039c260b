"""One handler per Workspace phase: each reads the caches and returns a ``Plan`` (the writes
its phase needs, the status to write and what follows it); ``act`` makes the writes.

Two writes cannot wait for the plan, because their answer changes it, and are made here as
explicit steps: the claim and the pod are created when missing (admission may refuse either,
which the status then reports), and a user's force-recycle marker is removed before the pod
it releases (``upkeep``). Reads beyond the caches are explicit too: the org status, the pod's
Events and the live episode checks of recovery and verification.

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
from collections.abc import Awaitable, Callable
from typing import Final

from controller.types import Obj, ObjectKey
from controller.workspace.pod import ownership
from controller.workspace.pod.builder import desired_pod, pod_is_stale, restart_generation_of
from controller.workspace.pod.credentials import (
    WorkspaceCredentials,
    derive_credentials,
    pod_credentials,
)
from controller.workspace.pod.facts import PodFacts, pod_facts
from controller.workspace.pod.names import PodBuildError, PodRejected, names
from controller.workspace.pod.phase import (
    POD_BUILD_FAILED,
    observe,
    recycling,
    served_before,
    waiting_phase,
)
from controller.workspace.pod.refusals import (
    POD_ADMITTED,
    PodAdmissionRefused,
)
from controller.workspace.pod.storage import claim_conflict, claim_name, desired_pvc
from controller.workspace.reconcile import idle, orgstatus
from controller.workspace.reconcile.act import refused_pod, stage
from controller.workspace.reconcile.deadlines import VERIFY_FAILURE_RECHECK
from controller.workspace.reconcile.deps import ReconcileDeps
from controller.workspace.reconcile.observe import Observed
from controller.workspace.reconcile.owner_record import org_to_check
from controller.workspace.reconcile.plan import DeletePod, Plan
from controller.workspace.reconcile.recovery_report import fold
from controller.workspace.reconcile.suspension import consumed
from controller.workspace.reconcile.upkeep import (
    Gate,
    expire,
    hold_recycle,
    kept_reason,
    suspended_notice,
    upkeep,
)
from wspin.core.kinds import PVCS
from wspin.core.logs import fields
from wspin.core.namespaces import excluded_namespace_problem
from wspin.core.runtimes import Runtime, resolve_runtime
from wspin.core.tenancy import runtime_class_problem
from wspin.core.workspace import Workspace

log = logging.getLogger("controller.workspace")

RUNTIME_NOT_FOUND: Final = "RuntimeNotFound"
"""Ready reason while a bare ``spec.runtime`` names no (runnable) RuntimeEnvironment."""
ORG_SUSPENDED: Final = "OrgSuspended"
"""Ready reason and Event of a Workspace stopped because its organisation is suspended."""

Handler = Callable[[ReconcileDeps, Observed], Awaitable[Plan]]


async def run(deps: ReconcileDeps, seen: Observed) -> Plan:
    """The handler of the phase ``seen`` records; the suspend request it acted on is marked
    consumed."""
    plan = await _HANDLERS.get(seen.previous, running)(deps, seen)
    if consumed(seen.previous, seen.request):
        plan.consume = seen.request
    return plan


# -- the phases ---------------------------------------------------------------------


async def running(deps: ReconcileDeps, seen: Observed) -> Plan:
    """Pending, Creating, Active, Resuming, Failed: the pod should run."""
    if seen.request is True:
        return _stop(seen)
    org = await _org_verdict(deps, seen)
    if org is not None and org.suspended:
        plan = _stop(seen, ORG_SUSPENDED, org.detail)
    else:
        try:
            plan = await _run_pod(deps, seen)
        except PodBuildError as err:
            plan = _failed(deps, seen.ws, err)
    if org is not None:
        plan.due(org.recheck)
    if not any(c.get("type") == POD_ADMITTED for c in plan.conditions):
        plan.remove = (*plan.remove, POD_ADMITTED)  # no refusal (any more)
    return plan


async def suspending(deps: ReconcileDeps, seen: Observed) -> Plan:
    """Stop the pod; Suspended once it is gone (its deletion event brings us back)."""
    status = seen.status
    if seen.view.status.reason == ORG_SUSPENDED and seen.request is not True:
        return _stop(seen, ORG_SUSPENDED, seen.view.status.message)
    kept = kept_reason(status)
    if kept is not None and seen.request is not True:
        return _stop(seen, *kept)
    return _stop(seen)


async def suspended(deps: ReconcileDeps, seen: Observed) -> Plan:
    """Stay Suspended until a resume request, or until the organisation whose suspension
    stopped the Workspace is active again; a suspend request makes it the user's own
    suspension (the organisation's reactivation then leaves it suspended)."""
    request, ws = seen.request, seen.ws
    by_org = seen.view.status.reason == ORG_SUSPENDED
    if request is True or not (request is False or by_org):
        kept = kept_reason(seen.status) if request is None else None
        stay = Plan("Suspended", reason=kept[0], detail=kept[1]) if kept else None
        stay = stay or Plan("Suspended")
        return expire(deps, ws, stay)
    org = await _org_verdict(deps, seen)
    if org is not None and org.suspended:
        plan = Plan("Suspended", reason=ORG_SUSPENDED, detail=org.detail)
        plan.due(org.recheck)
        return plan
    log.info("resuming workspace", extra=fields(workspace=str(ObjectKey.of(ws))))
    return Plan("Resuming")


async def retired(deps: ReconcileDeps, seen: Observed) -> Plan:
    """Terminating or Terminated without a deletion: the pod is stopped, nothing else (a
    Workspace kept past its TTL keeps saying so)."""
    pod = seen.own_pod()
    if pod is None:
        status = seen.view.status
        if status.reason == idle.TTL_EXPIRED:
            return Plan("Terminated", reason=idle.TTL_EXPIRED, detail=status.message)
        return Plan("Terminated")
    plan = Plan("Terminating")
    if not pod_facts(pod).deleting:
        plan.writes.append(DeletePod(pod))
    return plan


# -- the pod --------------------------------------------------------------------------


async def _run_pod(deps: ReconcileDeps, seen: Observed) -> Plan:
    """Build the pod (and its volume), then start, replace or observe it."""
    ws, key = seen.ws, seen.key
    excluded = excluded_namespace_problem(key.namespace, deps.settings.excluded_namespaces)
    if excluded:
        # Not a workspace namespace: nothing is ever staged for it.
        plan = _failed(deps, ws, PodBuildError(excluded))
        plan.staged = True
        return plan
    # The webhook refuses such a Workspace; checked again here, as the namespace's label or
    # the allow list may have changed since it was admitted.
    gated = runtime_class_problem(
        seen.view.spec.runtime_class,
        key.namespace,
        seen.labels,
        deps.settings.allowed_runtime_classes,
    )
    if gated:
        return _failed(deps, ws, PodBuildError(gated))
    runtime = _runtime(deps, ws)
    if isinstance(runtime, str):
        return _runtime_missing(seen, runtime)
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
            waiting = Plan(waiting_phase(seen.previous))
            await refused_pod(deps, ws, waiting, refused.refusal)
            return waiting
    plan = await _pod(deps, seen, body, credentials)
    plan.claim, plan.claim_uid = claim, claim_uid
    if plan.restart_generation is None:  # else: a drain holds the pod it was built for
        plan.restart_generation = int(restart_generation_of(ws))
    return plan


async def _pod(
    deps: ReconcileDeps, seen: Observed, body: Obj, credentials: WorkspaceCredentials
) -> Plan:
    ws, previous = seen.ws, seen.previous
    pod = seen.running_pod()
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
            if why is None:
                plan = Plan.observed(observe(facts, previous), pod_name=facts.name)
                plan.writes.append(DeletePod(pod))
                await _recover(deps, ws, pod, facts, plan, previous, credentials)
                return plan
            recycled = Plan.observed(
                recycling(previous, why), pod_name=facts.name, restarted=bool(untrusted)
            )
            recycled.writes.append(DeletePod(pod))
            recycled.notices += gate.notices
            return recycled
    if pod is None:
        plan = Plan.observed(observe(None, previous))
        if deps.recovery.missing(ws, plan, previous):
            return plan  # the retry after a failure is not due yet
        # Staged before the pod is built, so its first start finds its relay handoff.
        await stage(deps, ws, plan)
        try:
            await deps.writes.start_pod(ws, body, credentials)
        except PodAdmissionRefused as refused:
            await refused_pod(deps, ws, plan, refused.refusal)
            return plan
        plan.pod_name = body["metadata"]["name"]
        return plan
    assert facts is not None
    served = served_before(seen.status, facts)
    plan = Plan.observed(observe(facts, previous, served=served), pod=facts, pod_name=facts.name)
    verify_failed = False
    if not facts.deleting and await deps.verifier.check(ws, pod, plan.phase, plan):
        verify_failed = True
        plan.due(VERIFY_FAILURE_RECHECK)
    if await _recover(deps, ws, pod, facts, plan, previous, credentials, verify_failed):
        log.info(
            "replacing a workspace pod that does not start",
            extra=fields(workspace=str(ObjectKey.of(ws)), reason=plan.reason),
        )
        plan.writes.append(DeletePod(pod))
        return plan
    kept = await upkeep(deps, ws, pod, facts, plan, held, gate)
    if isinstance(kept, idle.AutoSuspend):
        stopped = _stop(seen, kept.reason, kept.message)
        stopped.notices.append(suspended_notice(kept))
        return stopped
    return kept


async def _recover(
    deps: ReconcileDeps,
    ws: Obj,
    pod: Obj,
    facts: PodFacts,
    plan: Plan,
    previous: str,
    credentials: WorkspaceCredentials,
    verify_failed: bool = False,
) -> bool:
    """Recovery for ``ws`` whose pod is ``pod``, folded into ``plan``: its reads, its
    decision, a boot failure confirmed new; True when the pod failed as a whole and goes."""
    reads = await deps.recovery.read(pod, facts)
    decided = deps.recovery.decide(
        ws,
        pod,
        facts,
        reads,
        phase=plan.phase,
        previous=previous,
        credentials=credentials,
        verify_failed=verify_failed,
    )
    await deps.recovery.confirm_boot(ws, pod, decided)
    fold(plan, ws, reads, decided, credentials)
    return decided.delete_pod


def _stop(seen: Observed, reason: str = "", detail: str = "") -> Plan:
    """Delete the pod (no drain: the termination grace bounds it); Suspended once gone."""
    pod = seen.own_pod()
    if pod is None:
        return Plan("Suspended", reason=reason, detail=detail)
    plan = Plan("Suspending", reason=reason, detail=detail, pod_name=names(seen.ws).pod)
    if not pod_facts(pod).deleting:
        plan.writes.append(DeletePod(pod))
    return plan


# -- causes ---------------------------------------------------------------------------


def _failed(deps: ReconcileDeps, ws: Obj, err: PodBuildError) -> Plan:
    """Phase Failed, counted as a Configuration failure: a pod the API server rejected is
    sent again once the class's backoff has passed (an admission policy or a quota may
    change meanwhile), one the builder refuses as soon as its cause is gone."""
    status = Workspace.of(ws).status
    # The message carries the fix too (which flag, value or field to change).
    said = status.message
    if status.phase != "Failed" or not said.startswith(str(err)):
        log.warning(  # once per cause: the reconciles its own status write brings are quiet
            "workspace pod cannot be built",
            extra=fields(workspace=str(ObjectKey.of(ws)), error=err.message),
        )
    plan = Plan("Failed", reason=POD_BUILD_FAILED, detail=str(err), failure_reason=POD_BUILD_FAILED)
    deps.recovery.build_failed(ws, plan, str(err), rejected=isinstance(err, PodRejected))
    return plan


def _runtime(deps: ReconcileDeps, ws: Obj) -> Runtime | str | None:
    """The RuntimeEnvironment a bare ``spec.runtime`` names, why it names none, or None for
    an image reference (the pod runs it as written)."""
    runtime = Workspace.of(ws).spec.runtime
    if deps.runtimes is None or not isinstance(runtime, str) or "/" in runtime:
        return None
    return resolve_runtime(runtime, deps.runtimes)


def _runtime_missing(seen: Observed, problem: str) -> Plan:
    """Ready=False RuntimeNotFound; a running pod is left as it is (it was built from an
    entry that was valid then), no new pod is built. The catalogue's watch brings the
    Workspace back when the entry appears."""
    pod = seen.own_pod()
    facts = pod_facts(pod) if pod is not None else None
    plan = Plan.observed(
        observe(facts, seen.previous), pod=facts, pod_name=facts.name if facts else ""
    )
    if facts is None:
        plan.phase = waiting_phase(seen.previous)
    plan.reason, plan.detail, plan.failure_reason = RUNTIME_NOT_FOUND, problem, ""
    return plan


async def _org_verdict(deps: ReconcileDeps, seen: Observed) -> orgstatus.OrgVerdict | None:
    """Whether the Workspace's organisation is suspended, when the API service is
    configured; None otherwise. The organisation is the vouched owner's
    (``owner_record.org_to_check``), else the namespace's ``llmsafespaces.dev/org`` label:
    ``spec.owner.orgID`` as it stands is never read. Unknown status never suspends."""
    org_id = org_to_check(seen.ws, seen.labels)
    if deps.orgs is None or org_id is None:
        return None
    return await orgstatus.verdict(deps.orgs, org_id)


_HANDLERS: Final[dict[str, Handler]] = {
    "Suspending": suspending,
    "Suspended": suspended,
    "Terminating": retired,
    "Terminated": retired,
}
