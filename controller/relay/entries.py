"""The status entry of a slot in each of its situations: launching, waiting out a backoff,
failed on configuration, or holding a VM just launched; and of its replacement. Pure.

Entries carry the slot's launch bookkeeping in status (``provisioningAttempts`` for the
breaker, ``launchFailures`` for the backoff, ``lastCheck`` for when the last attempt was), so
a restarted controller continues exactly where the last one stopped.

A slot holds one VM, and while that VM is being replaced, a second entry for its
replacement: ``replaces`` names the VM it replaces (dropped once it took over). Each VM boots
with its own token, stored under ``tokenKey`` in the token Secret (the provider's name unless
the entry says otherwise); a replacement takes the key its slot's VM does not hold, so the two
never share a token and taking over moves no token.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from controller.relay.spec import (
    Instance,
    ProviderSpec,
    new_instance,
    placeholder_id,
    replacement_placeholder_id,
)
from wspin.core.backoff import Backoff
from wspin.core.clock import format_time, parse_time

FAILED: Final = "provisioning-failed"
PROVISIONING: Final = "provisioning"

BREAKER_THRESHOLD: Final = 3
"""Configuration errors in a row after which a slot waits for a spec change."""
LAUNCH_BACKOFF: Final = Backoff(30.0, 600.0)
"""30 s doubling, capped at 10 minutes."""
SECOND_KEY_SUFFIX: Final = ".2"


def backoff_seconds(failures: int) -> float:
    """Delay before retry number ``failures + 1`` (``LAUNCH_BACKOFF``)."""
    return LAUNCH_BACKOFF.delay(failures)


def tripped(entry: Instance) -> bool:
    """The breaker is open: configuration errors reached the threshold (a spec change resets)."""
    attempts = int(entry.get("provisioningAttempts") or 0)
    return entry.get("state") == FAILED and attempts >= BREAKER_THRESHOLD


def wait_left(entry: Instance, now: datetime) -> float:
    """Seconds until a placeholder whose launches failed may launch again (0: now)."""
    attempts = int(entry.get("provisioningAttempts") or 0)
    failures = int(entry.get("launchFailures") or 0)
    if not (attempts or failures):
        return 0.0
    last = parse_time(entry.get("lastCheck")) or now
    due = last + timedelta(seconds=backoff_seconds(max(attempts, failures)))
    return max(0.0, (due - now).total_seconds())


def token_key(entry: Instance) -> str:
    """Where the token ``entry``'s VM booted with is stored."""
    return str(entry.get("tokenKey") or entry.get("provider") or "")


def spare_key(current: Instance) -> str:
    """The token key for a replacement of ``current``: the slot's key it does not hold."""
    provider = str(current.get("provider") or "")
    second = provider + SECOND_KEY_SUFFIX
    return provider if token_key(current) == second else second


def spare_placeholder(
    slot: ProviderSpec,
    replaces: str,
    key: str,
    *,
    attempts: int = 0,
    launch_failures: int = 0,
    error: str = "",
    now: datetime | None = None,
) -> Instance:
    """The entry of a replacement being launched (or waiting for a retry)."""
    entry = placeholder(slot, attempts=attempts, launch_failures=launch_failures, error=error)
    entry["id"] = replacement_placeholder_id(slot.provider)
    entry["replaces"] = replaces
    entry["tokenKey"] = key
    if now is not None:
        entry["lastCheck"] = format_time(now)
    return entry


def taken_over(spare: Instance) -> Instance:
    """A replacement that is now its slot's VM."""
    entry = dict(spare)
    entry.pop("replaces", None)
    return entry


def placeholder(
    slot: ProviderSpec, *, attempts: int = 0, launch_failures: int = 0, error: str = ""
) -> Instance:
    """The entry of a slot whose VM is being launched (or waits for a retry)."""
    entry = new_instance(
        instance_id=placeholder_id(slot.provider), provider=slot.provider, region=slot.region
    )
    if attempts:
        entry["provisioningAttempts"] = attempts
    if launch_failures:
        entry["launchFailures"] = launch_failures
    if error:
        entry["lastProvisionError"] = error
    return entry


def failure_entry(slot: ProviderSpec, attempts: int, error: str, now: datetime) -> Instance:
    """The placeholder of a slot whose launch failed on configuration (counts towards the
    breaker)."""
    return new_instance(
        instance_id=placeholder_id(slot.provider),
        provider=slot.provider,
        region=slot.region,
        state=FAILED,
        provisioningAttempts=attempts,
        lastProvisionError=f"provider configuration error: {error}"[:500],
        lastCheck=format_time(now),
    )


def retry_entry(
    slot: ProviderSpec, attempts: int, failures: int, error: str, now: datetime
) -> Instance:
    """The placeholder of a slot whose launch failed for a retryable reason (throttling,
    quota, a cloud outage): backs off, never trips the breaker."""
    entry = placeholder(slot, attempts=attempts, launch_failures=failures, error=error)
    entry["lastCheck"] = format_time(now)
    return entry


def launched_entry(
    slot: ProviderSpec, instance_id: str, now: datetime, failures: int = 0
) -> Instance:
    """A VM just launched; ``failures`` (earlier boots that died) is carried until it serves."""
    stamp = format_time(now)
    entry = new_instance(
        instance_id=instance_id,
        provider=slot.provider,
        region=slot.region,
        state=PROVISIONING,
        lastCheck=stamp,
        launchedAt=stamp,
    )
    if failures:
        entry["launchFailures"] = failures
    return entry
