"""What a pass knows about the VM behind one status entry. Pure: ``now`` is passed in.

- ``observed``: the cloud's view of the VM (the listing, else a describe), or ``"unknown"``
  when the cloud could not be asked (nothing is decided about it then);
- ``apply_health``: the router's report copied in, the state moved on (``transition``), and
  ``unhealthySince`` recorded while a VM that served does not;
- ``boot_overdue`` and ``unhealthy_seconds``: how long a VM has not served, which the
  replacement timeout is measured against.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Final

from controller.relay.actions import FleetPlan, Observation
from controller.relay.drivers.base import CloudInstance
from controller.relay.entries import FAILED, PROVISIONING
from controller.relay.health import HealthReport
from controller.relay.spec import Instance
from wspin.core.clock import format_time, parse_time

VISIBILITY_GRACE: Final = 300.0
"""Seconds after a launch during which a VM the cloud does not know yet is waited for: both
clouds' APIs are eventually consistent, and declaring a fresh VM gone would launch a second."""

UNHEALTHY: Final = "unhealthy"
_FROZEN_STATES: Final = frozenset({"draining", "terminated", "quota-exhausted", FAILED})

Seen = CloudInstance | str | None
"""A VM as observed: the cloud's report, ``"unknown"`` (could not ask), or None (gone)."""


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
    if state in ("", PROVISIONING):
        return state
    return UNHEALTHY


def observed(
    entry: Instance,
    by_id: Mapping[str, CloudInstance],
    seen: Observation,
    provider: str,
    now: datetime,
) -> Seen:
    """The entry's VM as the cloud reports it: the listing's view, else the describe's;
    ``"unknown"`` when nothing could be seen, or while a VM this controller launched moments
    ago is not visible yet."""
    listed = by_id.get(entry["id"])
    if listed is not None:
        return listed
    if entry["id"] in seen.described:
        found = seen.described[entry["id"]]
    elif provider in seen.unlisted or entry["id"] in seen.unknown:
        return "unknown"
    else:
        found = None
    launched = parse_time(entry.get("launchedAt"))
    if (
        found is None
        and launched is not None
        and (now - launched).total_seconds() < VISIBILITY_GRACE
    ):
        return "unknown"
    return found


def gone(vm: Seen) -> bool:
    """The cloud says the VM no longer runs (terminated, stopped, or unknown to it)."""
    return vm is None or (isinstance(vm, CloudInstance) and not vm.live)


def apply_health(entry: Instance, health: HealthReport | None, now: datetime) -> Instance:
    """``entry`` with the router's report applied (unchanged without a report)."""
    if not entry.get("lastCheck"):
        entry["lastCheck"] = format_time(now)
    if health is None:
        return entry
    relay = health.relays.get(entry["id"])
    healthy = relay is not None and relay.healthy
    if relay is not None:
        entry["429Count"] = relay.count_429
        entry["totalRequests"] = relay.requests_total
        entry["egressBytes"] = relay.egress_bytes
    entry["healthy"] = healthy
    entry["state"] = transition(str(entry.get("state") or ""), healthy)
    if entry["state"] == UNHEALTHY:
        entry.setdefault("unhealthySince", format_time(now))
    else:
        entry.pop("unhealthySince", None)
    if healthy:
        entry.pop("launchFailures", None)  # it serves: the boot backoff starts over
    return entry


def fill_ip(
    plan: FleetPlan, provider: str, entry: Instance, listed: CloudInstance | None, now: datetime
) -> None:
    """Copy a public IP the cloud shows only now; a VM this controller launched is timed
    once, when it first runs with one."""
    if listed is None or not listed.public_ip or entry.get("publicIP"):
        return
    entry["publicIP"] = listed.public_ip
    launched = parse_time(entry.get("launchedAt"))
    if launched is not None:
        plan.provisioned.append((provider, max((now - launched).total_seconds(), 0.0)))


def boot_overdue(entry: Instance, vm: CloudInstance | None, timeout: float, now: datetime) -> bool:
    """A VM still booting (never healthy) for longer than ``timeout``.

    The clock starts when the VM was both launched and published to the router (its first
    ``lastCheck``): a VM adopted long after its launch gets the whole timeout too."""
    if entry.get("state") != PROVISIONING:
        return False
    starts = [
        t
        for t in (vm.launched_at if vm else None, parse_time(entry.get("lastCheck")))
        if t is not None
    ]
    return bool(starts) and now - max(starts) >= timedelta(seconds=timeout)


def unhealthy_seconds(entry: Instance, now: datetime) -> float | None:
    """How long a VM that served has been unhealthy; None when it is not unhealthy."""
    if entry.get("state") != UNHEALTHY:
        return None
    since = parse_time(entry.get("unhealthySince"))
    return None if since is None else max(0.0, (now - since).total_seconds())
