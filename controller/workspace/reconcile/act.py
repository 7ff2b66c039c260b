"""What a pass decided, done: the writes of a ``Plan``, in one place, before the status write.

``act`` makes the plan's writes in order: a pod deleted with the termination grace, the
credentials Secret written again, a Workspace's own claims deleted past its TTL, the
Workspace itself deleted.

The steps whose answer changes the plan are here too, called by the phase handler at the
point it needs their answer: the relay staging pass (``stage``, run before a pod is built, so
its first start finds its relay handoff) and the report of a pod or claim admission refused
(``refused_pod``: ``PodAdmitted=False``, a retry delay growing with the episode, one Warning
Event per episode once the status records it).

Answers are the reconciler's to interpret (a Workspace or namespace gone ends the pass
quietly); a claim already gone is what was asked for.
"""

from __future__ import annotations

import contextlib
import logging

from controller.toolkit import episodes
from controller.types import Obj, ObjectKey, StagingReport
from controller.workspace.agent import report as agent_report
from controller.workspace.pod.names import names
from controller.workspace.pod.refusals import (
    ADMISSION_REFUSED,
    Refusal,
    recorded,
    refused_condition,
    retry_delay,
)
from controller.workspace.reconcile.deps import ReconcileDeps
from controller.workspace.reconcile.plan import (
    DeleteClaims,
    DeletePod,
    DeleteWorkspace,
    Notice,
    Plan,
    RestoreSecret,
)
from controller.workspace.reconcile.staging_phases import stages_in
from wspin.core.errors import NotFound
from wspin.core.kinds import PVCS, WORKSPACES
from wspin.core.logs import fields
from wspin.core.workspace import Workspace

log = logging.getLogger("controller.workspace")


async def act(deps: ReconcileDeps, ws: Obj, plan: Plan) -> None:
    """Make ``plan``'s writes for ``ws``, one after another."""
    meta = ws["metadata"]
    for write in plan.writes:
        if isinstance(write, DeletePod):
            await deps.writes.delete_pod(write.pod)
        elif isinstance(write, RestoreSecret):
            log.info(
                "restoring the workspace credentials secret the kubelet reports missing",
                extra=fields(workspace=str(ObjectKey.of(ws)), secret=names(ws).secret),
            )
            await deps.writes.write_secret(ws, write.credentials)
        elif isinstance(write, DeleteClaims):
            for pvc in write.claims:
                claim = pvc["metadata"]
                with contextlib.suppress(NotFound):
                    await deps.kube.delete(
                        PVCS, claim["name"], claim.get("namespace"), uid=str(claim.get("uid") or "")
                    )
        elif isinstance(write, DeleteWorkspace):
            await deps.kube.delete(
                WORKSPACES, meta["name"], meta.get("namespace"), uid=str(meta.get("uid") or "")
            )


async def stage(deps: ReconcileDeps, ws: Obj, plan: Plan) -> None:
    """Run the relay staging pass, when armed and ``plan``'s phase stages (every phase
    that may hold staged material: ``staging_phases``), once per reconcile, and fold its
    report into ``plan``."""
    if deps.staging is None or plan.staged or not stages_in(plan.phase):
        return
    plan.staged = True
    # Staging decides on what the pod applied: agentd's latest report, before it is written.
    report = await deps.staging.run(agent_report.with_delivery(ws, plan.agent))
    if isinstance(report, list):
        report = StagingReport(report)
    plan.conditions += report.conditions
    plan.remove = (*plan.remove, *report.remove)
    plan.error = report.error
    plan.staging_due = report.requeue_after


async def refused_pod(deps: ReconcileDeps, ws: Obj, plan: Plan, refusal: Refusal) -> None:
    """Admission refused the pod (or its claim): ``PodAdmitted=False`` and Ready=False naming
    who and why, a retry after a delay growing with the episode, and for a new episode one log
    line now and one Warning Event once the status records it (``refusals``)."""
    generation = int(ws["metadata"].get("generation") or 0)
    found = refused_condition(refusal, generation)
    conditions = Workspace.of(ws).status.conditions
    plan.conditions.append(found)
    plan.reason, plan.detail = ADMISSION_REFUSED, str(found["message"])
    plan.due(retry_delay(conditions, deps.clock()))
    if await episodes.new_episode(deps.kube, WORKSPACES, ws, recorded(refusal)):
        log.warning(
            "admission refused the workspace pod; retrying",
            extra=fields(
                workspace=str(ObjectKey.of(ws)),
                reason=refusal.reason,
                by=refusal.by,
                error=found["message"],
            ),
        )
        plan.notices.append(Notice("Warning", refusal.reason, str(found["message"])))
