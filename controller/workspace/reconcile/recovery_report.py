"""Recovery for the phase handlers: what it needs read before the decision, and what it reports
after the status is written.

Before (``assess``, ``missing``): the pod's Warning Events, read only for a pod whose start
waits on something its status does not name (``pod_events``); the decision itself
(``healing``); a boot failure checked new against the live Workspace too; the workspace
credentials Secret written again when the kubelet reports it missing (its values are derived,
so the restored Secret holds exactly what the running pod holds: no pod is recycled for it).

After (``report``): each notice the status now records becomes its metric increments
(``recovery_metrics``), a log line and, for a ``RecoveryExhausted`` episode or a boot failure,
one Warning Event. Reported only after the write, so a failed write means a retry that finds
the episode unrecorded, never a second report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from controller.toolkit.events import EventRecorder
from controller.types import Obj, ObjectKey
from controller.workspace.pod.credentials import WorkspaceCredentials
from controller.workspace.pod.facts import PodFacts
from controller.workspace.pod.names import names
from controller.workspace.pod.writes import OwnedWrites
from controller.workspace.reconcile.outcome import Outcome
from controller.workspace.recovery import boot, decision, stuck
from controller.workspace.recovery.episodes import new_episode
from controller.workspace.recovery.metrics import RecoveryMetrics
from controller.workspace.recovery.pod_events import PodEvent, PodEventReader
from controller.workspace.recovery.policy import RECOVERY_EXHAUSTED, spec_digest
from wspin.core.clock import Clock, utc_now
from wspin.core.kinds import WORKSPACES
from wspin.core.logs import fields
from wspin.core.redact import strip_url_credentials
from wspin.kube.client import Kube

log = logging.getLogger("controller.workspace")

Redact = Callable[[str], str]


class RecoveryReporter:
    """Recovery decisions into an ``Outcome``, and their reports once it is written."""

    def __init__(
        self,
        kube: Kube,
        writes: OwnedWrites,
        metrics: RecoveryMetrics,
        events: EventRecorder,
        *,
        clock: Clock = utc_now,
        redact: Redact = lambda text: text,
    ) -> None:
        self.kube = kube
        self.writes = writes
        self.metrics = metrics
        self.events = events
        self.clock = clock
        self.redact = redact
        """The process's redactor; URL credentials and the Workspace's own values go too."""
        self.pod_events = PodEventReader(kube, clock=clock)

    async def assess(
        self,
        ws: Obj,
        pod: Obj,
        facts: PodFacts,
        outcome: Outcome,
        *,
        previous: str,
        credentials: WorkspaceCredentials,
        verify_failed: bool = False,
    ) -> bool:
        """Decide recovery for ``ws`` whose pod is ``pod`` into ``outcome``; True when the pod
        failed as a whole and must be deleted."""
        now = self.clock()
        events: tuple[PodEvent, ...] = ()
        look = stuck.needs_events(pod, facts.created or now, now) if not facts.terminal else None
        if look is not None and look <= now:
            events = await self.pod_events.read(pod)
        elif look is not None:
            outcome.due((look - now).total_seconds())
        decided = decision.assess_pod(
            decision.PodView(
                status=ws.get("status") or {},
                generation=_generation(ws),
                pod=pod,
                facts=facts,
                phase=outcome.phase,
                previous=previous,
                now=now,
                verify_failed=verify_failed,
                spec=_spec(ws),
                events=events,
                redact=self._redactor(credentials),
            )
        )
        failing = decided.boot
        if failing is not None and await new_episode(
            self.kube, ws, lambda conditions: boot.reported(conditions, failing.container)
        ):
            described = next(
                str(c["message"]) for c in decided.conditions if c["type"] == boot.BOOT_READY
            )
            uid = str((pod.get("metadata") or {}).get("uid") or "")
            decided.notices.append(decision.BootFailed(failing, described, uid))
        if decided.missing_secret and decided.missing_secret == names(ws).secret:
            log.info(
                "restoring the workspace credentials secret the kubelet reports missing",
                extra=fields(workspace=str(ObjectKey.of(ws)), secret=decided.missing_secret),
            )
            await self.writes.write_secret(ws, credentials)
        _merge(outcome, decided)
        return decided.delete_pod

    def missing(self, ws: Obj, outcome: Outcome, previous: str) -> bool:
        """Decide recovery for ``ws`` without a pod into ``outcome``; True: a retry is not due
        yet, so no pod is created this pass."""
        decided = decision.assess_missing(
            ws.get("status") or {}, _generation(ws), previous, self.clock(), _spec(ws)
        )
        _merge(outcome, decided)
        return decided.due is not None

    def build_failed(self, ws: Obj, outcome: Outcome, problem: str, *, rejected: bool) -> None:
        """Decide recovery for ``ws`` whose pod cannot be built (``problem``; ``rejected``: by
        the API server) into ``outcome``: a Configuration failure, tried again after its
        backoff (``decision.assess_build_failure``)."""
        decided = decision.assess_build_failure(
            ws.get("status") or {},
            _generation(ws),
            self.clock(),
            problem,
            rejected=rejected,
            spec=_spec(ws),
        )
        _merge(outcome, decided)

    def _redactor(self, credentials: WorkspaceCredentials) -> Redact:
        return lambda text: credentials.redact(self.redact(strip_url_credentials(text)))

    async def report(self, ws: Obj, outcome: Outcome) -> None:
        """The metrics, log lines and Events of what the written status records."""
        if outcome.recovery is None:
            return
        key = str(ObjectKey.of(ws))
        for notice in outcome.recovery.notices:
            self.metrics.record(notice)
            if isinstance(notice, decision.Counted):
                log.info(
                    "workspace failure counted",
                    extra=fields(
                        workspace=key,
                        failure_class=notice.failure_class,
                        failures=outcome.recovery.state.failures,
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
                    episode=f"{RECOVERY_EXHAUSTED}/{_stamp(outcome.recovery.state.last_failure_at)}",
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


def _merge(outcome: Outcome, decided: decision.Assessment) -> None:
    outcome.recovery = decided
    outcome.conditions += decided.conditions
    if decided.reason and outcome.phase != "Active":
        outcome.reason, outcome.detail = decided.reason, decided.message
    outcome.due(decided.due)


def _generation(ws: Obj) -> int:
    return int(ws["metadata"].get("generation") or 0)


def _spec(ws: Obj) -> str:
    return spec_digest(ws.get("spec"))


def _stamp(moment: datetime | None) -> str:
    return moment.isoformat() if moment is not None else ""
