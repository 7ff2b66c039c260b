"""The reconciler's pure decisions: state transitions, conditions, backoff, requeue intervals.

Pure: no I/O, no clock (``now`` is passed in). Each function is tested on its own, with no
client and no cloud.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final, Literal

from controller.relay.spec import Condition, Instance
from controller.toolkit.clock import format_time

REQUEUE_PROVISIONING: Final = 10.0
REQUEUE_DEGRADED: Final = 15.0
REQUEUE_HEALTHY: Final = 30.0
REQUEUE_PAUSED: Final = 300.0
REQUEUE_ERROR: Final = 30.0

BREAKER_THRESHOLD: Final = 3
"""Configuration errors in a row after which a slot waits for a spec change."""
BACKOFF_BASE: Final = 30.0
BACKOFF_MAX: Final = 600.0

_FROZEN_STATES: Final = frozenset(
    {"draining", "terminated", "quota-exhausted", "provisioning-failed"}
)


def transition(state: str, healthy: bool) -> str:
    """The next instance state given what the router reports.

    A booting VM (``""`` or ``provisioning``) never drops to ``unhealthy``: the router needs two
    good probes before it calls a new relay healthy. States the controller does not drive are
    left alone.
    """
    if state in _FROZEN_STATES:
        return state
    if healthy:
        return "healthy"
    if state in ("", "provisioning"):
        return state
    return "unhealthy"


def backoff_seconds(failures: int) -> float:
    """Delay before retry number ``failures + 1``: 30 s doubling, capped at 10 minutes."""
    if failures <= 0:
        return 0.0
    return float(min(BACKOFF_MAX, BACKOFF_BASE * 2 ** (failures - 1)))


def set_condition(
    conditions: list[Condition],
    type_: str,
    status: bool,
    reason: str,
    message: str,
    now: datetime,
    observed_generation: int | None = None,
) -> None:
    """Update in place: transition time moves only when the status flips."""
    value: Literal["True", "False"] = "True" if status else "False"
    stamp = format_time(now)
    for condition in conditions:
        if condition.get("type") == type_:
            if condition.get("status") != value:
                condition["lastTransitionTime"] = stamp
            condition["status"] = value
            condition["reason"] = reason
            condition["message"] = message
            if observed_generation is not None:
                condition["observedGeneration"] = observed_generation
            return
    added: Condition = {
        "type": type_,
        "status": value,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }
    if observed_generation is not None:
        added["observedGeneration"] = observed_generation
    conditions.append(added)


def find_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def fleet_conditions(
    conditions: list[Condition],
    instances: Sequence[Instance],
    *,
    fallback_active: bool,
    now: datetime,
) -> None:
    """Ready, Degraded and FallbackActive for the fleet.

    Ready means at least one relay serves (traffic flows); Degraded carries what is missing.
    """
    total = len(instances)
    healthy = sum(1 for i in instances if i.get("healthy"))
    summary = f"{healthy}/{total} relays healthy"
    if total == 0:
        set_condition(conditions, "Ready", False, "NoInstances", "No relay instances", now)
        set_condition(conditions, "Degraded", True, "Empty", "No relay instances", now)
    elif healthy == total:
        set_condition(conditions, "Ready", True, "AllRelaysHealthy", summary, now)
        set_condition(conditions, "Degraded", False, "FleetHealthy", "", now)
    elif healthy == 0:
        set_condition(conditions, "Ready", False, "NoHealthyRelays", summary, now)
        set_condition(
            conditions, "Degraded", True, "AllRelaysUnhealthy", _not_healthy(instances), now
        )
    else:
        set_condition(conditions, "Ready", True, "PartialFleet", summary, now)
        set_condition(conditions, "Degraded", True, "PartialOutage", _not_healthy(instances), now)
    if fallback_active:
        set_condition(
            conditions, "FallbackActive", True, "AllRelaysDown", "Router is in fallback mode", now
        )
    else:
        set_condition(conditions, "FallbackActive", False, "Normal", "", now)


def _not_healthy(instances: Sequence[Instance]) -> str:
    parts = [
        f"{i.get('provider')} {i.get('state') or 'unknown'}"
        + (f" ({i['lastProvisionError']})" if i.get("lastProvisionError") else "")
        for i in instances
        if not i.get("healthy")
    ]
    return "not healthy: " + ", ".join(parts)


def requeue_seconds(*, busy: bool, healthy: int, total: int) -> float:
    """10 s while a slot is provisioning, 15 s while degraded, 30 s when all is well."""
    if busy:
        return REQUEUE_PROVISIONING
    if healthy < total:
        return REQUEUE_DEGRADED
    return REQUEUE_HEALTHY
