"""Telling operators about replacements: one Event and one metric per replacement started,
one Event per replacement completed, each only once it really happened (the launch returned
an id, the old VM was destroyed).

Events go on the InferenceRelay (cluster scoped, so they land in the ``default`` namespace);
each is named as an episode (the old VM and the step), so a pass retried after a failed
status write does not repeat it. Messages name VMs, providers and spec fields, never a token.
"""

from __future__ import annotations

import logging
from typing import Final

from controller.relay.actions import FleetPlan, Replacing
from controller.relay.execute import ExecutionResult
from controller.relay.metrics import RelayMetrics
from controller.relay.spec import RelaySpec, has_real_id
from controller.toolkit.events import EventRecorder
from controller.types import Obj
from wspin.core.kinds import INFERENCE_RELAYS
from wspin.core.logs import fields

log = logging.getLogger(__name__)

STARTED: Final = "RelayReplacing"
COMPLETED: Final = "RelayReplaced"


def _duration(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"


async def announce(
    events: EventRecorder,
    metrics: RelayMetrics,
    cr: Obj,
    spec: RelaySpec,
    plan: FleetPlan,
    outcome: ExecutionResult,
) -> None:
    """Record the replacements ``plan`` started or completed that ``outcome`` carried out."""
    name = cr["metadata"].get("name")
    for step in plan.started:
        new = _launched_for(step, outcome)
        if step.in_place and step.old not in outcome.destroyed:
            continue
        if not step.in_place and not new:
            continue
        mode = "in_place" if step.in_place else "surge"
        metrics.replacements.labels(provider=step.provider, mode=mode).inc()
        how = (
            "destroyed; its slot launches a new VM (spec.healthCheck.maxSurge 0)"
            if step.in_place
            else f"replacement {new} launched beside it (spec.healthCheck.maxSurge "
            f"{spec.max_surge})"
        )
        message = (
            f"{step.provider} relay {step.old} unhealthy for {_duration(step.unhealthy_seconds)} "
            f"(spec.healthCheck.replacementTimeout "
            f"{_duration(spec.replacement_timeout_seconds)}): {how}"
        )
        log.warning("replacing unhealthy relay VM", extra=fields(relay=name, detail=message))
        await events.emit(
            cr, INFERENCE_RELAYS, "Warning", STARTED, message, episode=f"{step.old}/{mode}"
        )
    for step in plan.completed:
        if not _took_over(step, outcome):
            continue
        message = f"{step.provider} relay {step.old} replaced by {step.new}"
        log.info("relay VM replaced", extra=fields(relay=name, detail=message))
        await events.emit(
            cr, INFERENCE_RELAYS, "Normal", COMPLETED, message, episode=f"{step.old}/replaced"
        )


def _launched_for(step: Replacing, outcome: ExecutionResult) -> str:
    """The VM launched to replace ``step.old`` this pass, "" when the launch failed."""
    for entry in outcome.instances:
        if entry.get("replaces") == step.old and has_real_id(entry):
            return str(entry["id"])
    return ""


def _took_over(step: Replacing, outcome: ExecutionResult) -> bool:
    """The replacement is its slot's VM after this pass (the old VM's destroy went through,
    or it was gone already)."""
    return any(
        entry.get("id") == step.new and not entry.get("replaces") for entry in outcome.instances
    )
