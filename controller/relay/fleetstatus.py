"""The fleet's status after a pass: the conditions and the requeue interval. Pure.

- ``Ready``: at least ``minHealthy`` relays serve (one at least: traffic flows);
  ``Degraded`` says what is missing, and why a due replacement waits.
- ``FallbackActive``: the router reports that it sends traffic around the relays.
- ``ProvisioningFailed``: True with ``CircuitBreakerTripped`` once a slot's configuration
  errors reach the breaker's threshold; its ``observedGeneration`` is how the next pass knows
  the spec changed since (which resets the count).
- ``Rotating``: True from a manual rotation until every slot is healthy again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from controller.relay.drivers.base import truncate
from controller.relay.entries import BREAKER_THRESHOLD, FAILED, PROVISIONING
from controller.relay.health import HealthReport
from controller.relay.plan import (
    REQUEUE_DEGRADED,
    REQUEUE_HEALTHY,
    REQUEUE_PROVISIONING,
)
from controller.relay.spec import Instance
from controller.toolkit.conditions import condition, find_condition, set_conditions
from controller.types import Obj
from wspin.core.clock import format_time


def fleet_status(
    old: Obj,
    instances: Sequence[Instance],
    health: HealthReport | None,
    *,
    now: datetime,
    generation: int | None,
    rotated: str = "",
    minimum: int = 1,
    notes: Sequence[str] = (),
) -> Obj:
    """The new status: ``old`` with the pass's instances, counts and conditions.

    ``rotated``: the message of a manual rotation this pass carried out ("" for none);
    ``minimum``: the healthy relays Ready needs (``minHealthy``, capped at the slot count);
    ``notes``: why due replacements wait, for the Degraded message.
    """
    healthy = sum(1 for i in instances if i.get("healthy"))
    new: Obj = {**old, "instances": list(instances), "healthyReplicas": healthy}
    fallback = bool(health and health.fallback_active)
    wanted = _fleet_conditions(instances, healthy, fallback, max(1, minimum), notes)
    wanted.append(_breaker(instances, generation))
    current = list(old.get("conditions") or [])
    if rotated:
        wanted.append(condition("Rotating", True, "ManualRotation", rotated, None))
        new["lastRotation"] = format_time(now)
    else:
        rotating = find_condition(current, "Rotating")
        if (
            rotating
            and rotating.get("status") == "True"
            and instances
            and healthy == len(instances)
        ):
            wanted.append(
                condition("Rotating", False, "RotationComplete", "replacement is healthy", None)
            )
    new["conditions"] = set_conditions(current, wanted, format_time(now))
    return new


def _fleet_conditions(
    instances: Sequence[Instance],
    healthy: int,
    fallback: bool,
    minimum: int,
    notes: Sequence[str],
) -> list[Obj]:
    total = len(instances)
    summary = f"{healthy}/{total} relays healthy"
    if total == 0:
        found = [
            condition("Ready", False, "NoInstances", "No relay instances", None),
            condition("Degraded", True, "Empty", "No relay instances", None),
        ]
    elif healthy == total:
        found = [
            condition("Ready", True, "AllRelaysHealthy", summary, None),
            condition("Degraded", False, "FleetHealthy", "", None),
        ]
    elif healthy == 0:
        found = [
            condition("Ready", False, "NoHealthyRelays", summary, None),
            condition("Degraded", True, "AllRelaysUnhealthy", _not_healthy(instances, notes), None),
        ]
    elif healthy < minimum:
        below = f"{summary}, spec.healthCheck.minHealthy is {minimum}"
        found = [
            condition("Ready", False, "BelowMinimum", below, None),
            condition("Degraded", True, "PartialOutage", _not_healthy(instances, notes), None),
        ]
    else:
        found = [
            condition("Ready", True, "PartialFleet", summary, None),
            condition("Degraded", True, "PartialOutage", _not_healthy(instances, notes), None),
        ]
    if fallback:
        found.append(
            condition("FallbackActive", True, "AllRelaysDown", "Router is in fallback mode", None)
        )
    else:
        found.append(condition("FallbackActive", False, "Normal", "", None))
    return found


def _breaker(instances: Sequence[Instance], generation: int | None) -> Obj:
    failed = [i for i in instances if i.get("state") == FAILED]
    tripped = [i for i in failed if int(i.get("provisioningAttempts") or 0) >= BREAKER_THRESHOLD]
    if tripped:
        message = "; ".join(
            f"{i['provider']} failed {i['provisioningAttempts']} times: "
            f"{i.get('lastProvisionError', '')}"
            for i in tripped
        )
        return condition(
            "ProvisioningFailed",
            True,
            "CircuitBreakerTripped",
            truncate(message + " (retried after the spec changes)", 1000),
            generation,
        )
    reason = "Retrying" if failed else "NoFailures"
    message = ", ".join(f"{i['provider']} failed, retrying" for i in failed)
    return condition("ProvisioningFailed", False, reason, message, generation)


def _not_healthy(instances: Sequence[Instance], notes: Sequence[str] = ()) -> str:
    parts = [
        f"{i.get('provider')} {'replacement ' if i.get('replaces') else ''}"
        f"{i.get('state') or 'unknown'}"
        + (f" ({i['lastProvisionError']})" if i.get("lastProvisionError") else "")
        for i in instances
        if not i.get("healthy")
    ]
    return truncate("; ".join(["not healthy: " + ", ".join(parts), *notes]), 2000)


def requeue_seconds(instances: Sequence[Instance], waits: Sequence[float] = ()) -> float:
    """10 s while a slot is provisioning, 15 s while degraded, 30 s when all is well; sooner
    when a backoff ends sooner."""
    healthy = sum(1 for i in instances if i.get("healthy"))
    if any(i.get("state") == PROVISIONING for i in instances):
        seconds = REQUEUE_PROVISIONING
    elif healthy < len(instances):
        seconds = REQUEUE_DEGRADED
    else:
        seconds = REQUEUE_HEALTHY
    return min([seconds, *(w for w in waits if w > 0)])
