"""The verified conditions of a Workspace's pod, and one report per verify-failure episode.

A pod whose agentd or opencode binary fails its sha256 check exits 81 to 84
(``verify.detect_failure``): the Workspace gets ``AgentdVerified``/``OpencodeVerified`` False
with the verifier's message, and each new episode one error log line, one Warning Event and
one metric increment, sent only after the status records the episode (a failed status write
then means a retry that finds the episode unrecorded, never a second report).
"""

from __future__ import annotations

import logging

from controller.toolkit import episodes
from controller.toolkit.events import EventRecorder
from controller.types import Obj, ObjectKey
from controller.workspace.reconcile.plan import Plan
from controller.workspace.recovery import verify
from controller.workspace.recovery.verify_metrics import VerifyMetrics
from wspin.core.contract import ARTIFACTS
from wspin.core.fleet import Phase
from wspin.core.kinds import WORKSPACES
from wspin.core.logs import fields
from wspin.kube.client import Kube

log = logging.getLogger("controller.workspace")


class VerifyReporter:
    """Verified conditions into an ``Plan``, and the reports of new failure episodes."""

    def __init__(self, kube: Kube, metrics: VerifyMetrics, events: EventRecorder) -> None:
        self.kube = kube
        self.metrics = metrics
        self.events = events

    async def check(
        self, ws: Obj, pod: Obj, phase: Phase, plan: Plan
    ) -> verify.VerifyFailure | None:
        """Verified conditions for ``pod`` into ``plan``; a failure that starts a new
        episode is queued for its one Event and metric increment."""
        generation = int(ws["metadata"].get("generation") or 0)
        failure = verify.detect_failure(pod)
        for artifact in ARTIFACTS:
            if not verify.has_marker(pod, artifact):
                # Never marked verified, never blamed; a verdict left over from an earlier
                # pod would claim a check this pod never ran, so it goes.
                plan.remove = (*plan.remove, verify.condition_type(artifact))
                continue
            if failure is not None and failure.artifact == artifact:
                plan.conditions.append(verify.failed_condition(failure, generation))
                if await episodes.new_episode(self.kube, WORKSPACES, ws, _recorded(failure)):
                    episode = f"{pod['metadata'].get('uid', '')}/{failure.kind.reason}"
                    plan.failures.append((failure, episode))
            elif phase == "Active":
                plan.conditions.append(verify.verified_condition(artifact, generation))
        return failure

    async def report(self, ws: Obj, failure: verify.VerifyFailure, episode: str) -> None:
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


def _recorded(failure: verify.VerifyFailure) -> episodes.Recorded:
    """Whether conditions already record ``failure``: the same False reason."""
    return episodes.recorded_as(
        verify.condition_type(failure.artifact), status="False", reason=failure.kind.reason
    )
