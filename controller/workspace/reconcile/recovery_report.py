"""Recovery for the phase handlers, in the pass's order: what it reads, what it decides, what
it reports once the status is written.

Observe (``read``): the pod's Warning Events, read only for a pod whose start waits on
something its status does not name (``pod_events``). Decide (``decide``, ``missing``,
``build_failed``: ``recovery.decision``, pure), then ``confirm_boot``: a boot failure checked
new against the live Workspace too. ``fold`` puts the decision in the ``Plan``, with the
credentials Secret to write again when the kubelet reports it missing (``act`` writes it).

Record (``report``): each notice the status now records becomes its metric increments
(``recovery_metrics``), a log line and, for a ``RecoveryExhausted`` episode or a boot failure,
one Warning Event. Reported only after the write, so a failed write means a retry that finds
the episode unrecorded, never a second report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from controller.toolkit import episodes
from controller.toolkit.events import EventRecorder
from controller.types import Obj, ObjectKey
from controller.workspace.pod.credentials import WorkspaceCredentials
from controller.workspace.pod.facts import PodFacts
from controller.workspace.pod.names import names
from controller.workspace.reconcile.plan import Plan, RestoreSecret
from controller.workspace.recovery import boot, decision, stuck
from controller.workspace.recovery.metrics import RecoveryMetrics
from controller.workspace.recovery.pod_events import PodEvent, PodEventReader
from controller.workspace.recovery.policy import RECOVERY_EXHAUSTED, spec_digest
from wspin.core.clock import Clock, utc_now
from wspin.core.fleet import Phase
from wspin.core.kinds import WORKSPACES
from wspin.core.logs import fields
from wspin.core.redact import strip_url_credentials
from wspin.kube.client import Kube

log = logging.getLogger("controller.workspace")

Redact = Callable[[str], str]


@dataclass(frozen=True)
class PodReads:
    """What recovery read for a pod beyond the caches: the time of the pass, the pod's Warning
    Events (empty until worth reading) and when they will be (seconds; None: never)."""

    now: datetime
    events: tuple[PodEvent, ...] = ()
    look_in: float | None = None


def fold(
    plan: Plan,
    ws: Obj,
    reads: PodReads,
    decided: decision.Assessment,
    credentials: WorkspaceCredentials,
) -> None:
    """Fold a pod's recovery decision into ``plan`` (pure): its record, conditions and
    deadlines, and the credentials Secret written again when the kubelet reports it missing
    (its values are derived, so the restored Secret holds exactly what the running pod holds:
    no pod is recycled for it)."""
    plan.due(reads.look_in)
    if decided.missing_secret and decided.missing_secret == names(ws).secret:
        plan.writes.append(RestoreSecret(credentials))
    _merge(plan, decided)


class RecoveryReporter:
    """Recovery decisions into an ``Plan``, and their reports once it is written."""

    def __init__(
        self,
        kube: Kube,
        metrics: RecoveryMetrics,
        events: EventRecorder,
        *,
        clock: Clock = utc_now,
        redact: Redact = lambda text: text,
    ) -> None:
        self.kube = kube
        self.metrics = metrics
        self.events = events
        self.clock = clock
        self.redact = redact
        """The process's redactor; URL credentials and the Workspace's own values go too."""
        self.pod_events = PodEventReader(kube, clock=clock)

    async def read(self, pod: Obj, facts: PodFacts) -> PodReads:
        """What the decision needs beyond the caches (observe): the pod's Warning Events, read
        only once they are worth reading (``stuck.needs_events``), else when they will be."""
        now = self.clock()
        look = stuck.needs_events(pod, facts.created or now, now) if not facts.terminal else None
        if look is not None and look <= now:
            return PodReads(now, await self.pod_events.read(pod))
        return PodReads(now, (), (look - now).total_seconds() if look is not None else None)

    def decide(
        self,
        ws: Obj,
        pod: Obj,
        facts: PodFacts,
        reads: PodReads,
        *,
        phase: Phase,
        previous: str,
        credentials: WorkspaceCredentials,
        verify_failed: bool = False,
    ) -> decision.Assessment:
        """The recovery decision for ``ws`` whose pod is ``pod`` (pure: ``decision``)."""
        return decision.assess_pod(
            decision.PodView(
                status=ws.get("status") or {},
                generation=_generation(ws),
                pod=pod,
                facts=facts,
                phase=phase,
                previous=previous,
                now=reads.now,
                verify_failed=verify_failed,
                spec=_spec(ws),
                events=reads.events,
                redact=self._redactor(credentials),
            )
        )

    async def confirm_boot(self, ws: Obj, pod: Obj, decided: decision.Assessment) -> None:
        """A boot failure the decision found is reported once per episode: checked new
        against the live Workspace too (the cache may lag behind the status that records
        it), and then queued for its Event."""
        failing = decided.boot
        if failing is None or not await episodes.new_episode(
            self.kube,
            WORKSPACES,
            ws,
            lambda conditions: boot.reported(conditions, failing.container),
        ):
            return
        described = next(
            str(c["message"]) for c in decided.conditions if c["type"] == boot.BOOT_READY
        )
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        decided.notices.append(decision.BootFailed(failing, described, uid))

    def missing(self, ws: Obj, plan: Plan, previous: str) -> bool:
        """Decide recovery for ``ws`` without a pod into ``plan``; True: a retry is not due
        yet, so no pod is created this pass."""
        decided = decision.assess_missing(
            ws.get("status") or {}, _generation(ws), previous, self.clock(), _spec(ws)
        )
        _merge(plan, decided)
        return decided.due is not None

    def build_failed(self, ws: Obj, plan: Plan, problem: str, *, rejected: bool) -> None:
        """Decide recovery for ``ws`` whose pod cannot be built (``problem``; ``rejected``: by
        the API server) into ``plan``: a Configuration failure, tried again after its
        backoff (``decision.assess_build_failure``)."""
        decided = decision.assess_build_failure(
            ws.get("status") or {},
            _generation(ws),
            self.clock(),
            problem,
            rejected=rejected,
            spec=_spec(ws),
        )
        _merge(plan, decided)

    def _redactor(self, credentials: WorkspaceCredentials) -> Redact:
        return lambda text: credentials.redact(self.redact(strip_url_credentials(text)))

    async def report(self, ws: Obj, plan: Plan) -> None:
        """The metrics, log lines and Events of what the written status records."""
        if plan.recovery is None:
            return
        key = str(ObjectKey.of(ws))
        for notice in plan.recovery.notices:
            self.metrics.record(notice)
            if isinstance(notice, decision.Counted):
                log.info(
                    "workspace failure counted",
                    extra=fields(
                        workspace=key,
                        failure_class=notice.failure_class,
                        failures=plan.recovery.state.failures,
                        reason=notice.pod_reason or "container exited",
                    ),
                )
            elif isinstance(notice, decision.Exhausted):
                log.warning(
                    "workspace recovery exhausted",
                    extra=fields(workspace=key, failure_class=notice.failure_class),
                )
                await self.events.emit(
                    ws,
                    WORKSPACES,
                    "Warning",
                    RECOVERY_EXHAUSTED,
                    notice.message,
                    episode=f"{RECOVERY_EXHAUSTED}/{_stamp(plan.recovery.state.last_failure_at)}",
                )
            elif isinstance(notice, decision.BootFailed):
                failure = notice.failure
                log.error(
                    "workspace platform boot failed",
                    extra=fields(
                        workspace=key,
                        container=failure.container,
                        node=failure.node,
                        exit_code=failure.exit_code,
                    ),
                )
                await self.events.emit(
                    ws,
                    WORKSPACES,
                    "Warning",
                    boot.PLATFORM_BOOT_FAILED,
                    boot.event_message(failure, notice.described),
                    episode=f"{boot.PLATFORM_BOOT_FAILED}/{notice.pod}/{failure.container}",
                )


def _merge(plan: Plan, decided: decision.Assessment) -> None:
    plan.recovery = decided
    plan.conditions += decided.conditions
    if decided.reason and plan.phase != "Active":
        plan.reason, plan.detail = decided.reason, decided.message
    plan.due(decided.due)


def _generation(ws: Obj) -> int:
    return int(ws["metadata"].get("generation") or 0)


def _spec(ws: Obj) -> str:
    return spec_digest(ws.get("spec"))


def _stamp(moment: datetime | None) -> str:
    return moment.isoformat() if moment is not None else ""
