"""The status entry of a slot in each of its situations: launching, waiting out a backoff,
failed on configuration, or holding a VM just launched. Pure.

Entries carry the slot's launch bookkeeping in status (``provisioningAttempts`` for the
breaker, ``launchFailures`` for the backoff, ``lastCheck`` for when the last attempt was), so
a restarted controller continues exactly where the last one stopped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from controller.relay.spec import Instance, ProviderSpec, new_instance, placeholder_id
from wspin.core.clock import format_time

FAILED: Final = "provisioning-failed"
PROVISIONING: Final = "provisioning"


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
