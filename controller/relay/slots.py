"""Filling an empty fleet slot: launch a VM, wait for or collect an in-flight launch, or back
off. Configuration errors leave a visible ``provisioning-failed`` placeholder whose attempt
count trips a breaker at 3 (cleared by a spec change); other failures back off in memory.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from controller.relay.decisions import BREAKER_THRESHOLD, backoff_seconds
from controller.relay.drivers.base import ConfigurationError, ProvisionResult, truncate
from controller.relay.launches import LaunchKey, build_request
from controller.relay.passstate import FleetPass, save_tokens
from controller.relay.spec import (
    Instance,
    ProviderSpec,
    has_real_id,
    new_instance,
    placeholder_id,
)
from controller.relay.tokens import generate_token
from controller.toolkit.clock import format_time, parse_time
from wspin.logs import fields

log = logging.getLogger(__name__)


async def fill_slot(p: FleetPass, slot: ProviderSpec) -> Instance | None:
    """Launch (or keep waiting for, or back off from) the VM of an empty slot."""
    key = LaunchKey(p.uid, slot.provider)
    launches = p.deps.launches
    previous = _previous_failure(p, slot.provider)
    if launches.get(key) is None:
        attempts = 0 if previous is None else int(previous.get("provisioningAttempts") or 0)
        if previous is not None and previous.get("state") == "provisioning-failed":
            if attempts >= BREAKER_THRESHOLD:
                return previous  # tripped: waits for a spec change
            last = parse_time(previous.get("lastCheck")) or p.now
            due = last + timedelta(seconds=backoff_seconds(attempts))
            if due > p.now:
                p.waits.append((due - p.now).total_seconds())
                return previous
        retry_due = p.retries.due(key, p.now)
        if retry_due is not None:
            p.waits.append((retry_due - p.now).total_seconds())
            return _in_flight(slot, p.retries.last_error(key), previous)
        started = await _start_launch(p, slot, key)
        if isinstance(started, ConfigurationError):
            return _config_failure(p, slot, started)
        if started is not None:
            return started
        wait = p.deps.launch_wait_seconds  # only the pass that started it waits inline
    else:
        wait = 0.0
    if not await launches.wait(key, wait):
        p.busy = True
        return _in_flight(slot, "", previous)
    task = launches.collect(key)
    assert task is not None
    p.busy = True
    if task.cancelled():
        return _in_flight(slot, "launch was cancelled", previous)
    error = task.exception()
    if error is None:
        return _launched(p, slot, task.result())
    if isinstance(error, ConfigurationError):
        return _config_failure(p, slot, error)
    failures = p.retries.failed(key, p.now, truncate(str(error)))
    log.warning(
        "relay VM launch failed; will retry",
        extra=fields(provider=slot.provider, failures=failures, error=truncate(str(error))),
    )
    retry_due = p.retries.due(key, p.now)
    if retry_due is not None:
        p.waits.append((retry_due - p.now).total_seconds())
    return _in_flight(slot, truncate(str(error)), previous)


async def _start_launch(
    p: FleetPass, slot: ProviderSpec, key: LaunchKey
) -> Instance | ConfigurationError | None:
    """Start the launch task; an Instance or error when it cannot start, else None."""
    driver = p.deps.drivers.get(slot.provider)
    if driver is None:
        return ConfigurationError(
            f"no driver for provider {slot.provider}",
            "remove it from spec.providers; this controller runs: "
            + (", ".join(sorted(p.deps.drivers)) or "none"),
        )
    fresh = slot.provider not in p.tokens
    vm_token = p.tokens.get(slot.provider) or generate_token()
    try:
        request = build_request(
            slot,
            uid=p.uid,
            upstream_url=p.spec.upstream_url,
            vm_token=vm_token,
            artifacts=p.deps.artifacts,
            expected_credentials=p.deps.expected_credentials,
        )
    except ConfigurationError as err:
        return err
    if fresh:
        p.tokens[slot.provider] = vm_token
        p.tokens_dirty = True
    if p.tokens_dirty and not await save_tokens(p):
        # Never launch a VM with a token that is not stored: relay-proxy would 401 forever.
        p.retries.failed(key, p.now, "cannot store the VM token")
        p.busy = True
        return _in_flight(slot, "cannot store the VM token")
    started = p.now
    p.deps.launches.start(
        key, _timed(p, driver.provision(request), slot.provider, started), slot.region
    )
    return None


async def _timed(p: FleetPass, launch: Any, provider: str, started: datetime) -> ProvisionResult:
    result: ProvisionResult = await launch
    elapsed = (p.deps.clock() - started).total_seconds()
    p.deps.metrics.provision_duration.labels(provider=provider).observe(max(elapsed, 0.0))
    return result


def _launched(p: FleetPass, slot: ProviderSpec, result: ProvisionResult) -> Instance:
    p.retries.clear(LaunchKey(p.uid, slot.provider))
    log.info(
        "relay VM launched",
        extra=fields(provider=slot.provider, instance=result.instance_id, region=slot.region),
    )
    return new_instance(
        instance_id=result.instance_id,
        provider=slot.provider,
        region=slot.region,
        public_ip=result.public_ip,
        lastCheck=format_time(p.now),
    )


def _config_failure(p: FleetPass, slot: ProviderSpec, error: ConfigurationError) -> Instance:
    previous = _previous_failure(p, slot.provider)
    attempts = 1 + (int(previous.get("provisioningAttempts") or 0) if previous else 0)
    p.busy = True
    if attempts < BREAKER_THRESHOLD:
        p.waits.append(backoff_seconds(attempts))
    log.warning(
        "relay VM cannot be launched: provider configuration error",
        extra=fields(provider=slot.provider, attempts=attempts, error=truncate(str(error))),
    )
    return new_instance(
        instance_id=placeholder_id(slot.provider),
        provider=slot.provider,
        region=slot.region,
        state="provisioning-failed",
        provisioningAttempts=attempts,
        lastProvisionError=truncate(f"provider configuration error: {error}", 500),
        lastCheck=format_time(p.now),
    )


def _previous_failure(p: FleetPass, provider: str) -> Instance | None:
    """The slot's placeholder from the last pass that counts configuration errors: a failed
    one, or an in-flight one carrying the count on (status is the breaker's only memory)."""
    if p.spec_changed:
        return None
    return next(
        (
            i
            for i in p.old
            if i.get("provider") == provider
            and not has_real_id(i)
            and (
                i.get("state") == "provisioning-failed"
                or int(i.get("provisioningAttempts") or 0) > 0
            )
        ),
        None,
    )


def _in_flight(slot: ProviderSpec, error: str, previous: Instance | None = None) -> Instance:
    """The placeholder of a slot whose launch runs or waits for a retry; it carries the
    configuration-error count on, so a slow launch that fails again still trips the breaker."""
    entry = new_instance(
        instance_id=placeholder_id(slot.provider), provider=slot.provider, region=slot.region
    )
    attempts = int((previous or {}).get("provisioningAttempts") or 0)
    if attempts:
        entry["provisioningAttempts"] = attempts
    if error:
        entry["lastProvisionError"] = error
    return entry
