"""The state one fleet pass carries between its steps, and the side effects every step shares
(destroying a VM, dropping and saving tokens), so the step modules stay small.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from controller.relay.decisions import backoff_seconds
from controller.relay.deps import RelayDeps
from controller.relay.drivers.base import CloudInstance
from controller.relay.health import HealthReport
from controller.relay.launches import LaunchKey
from controller.relay.spec import Instance, RelaySpec
from controller.relay.tokens import write_tokens
from wspin.logs import fields

log = logging.getLogger(__name__)


@dataclass
class RetryBook:
    """Backoff for launches that failed for a non-configuration reason (capacity, timeout).

    In memory, like a work queue's rate limiter: a restart retries at once, which is fine.
    """

    entries: dict[LaunchKey, tuple[int, datetime, str]] = field(default_factory=dict)

    def due(self, key: LaunchKey, now: datetime) -> datetime | None:
        entry = self.entries.get(key)
        return entry[1] if entry and entry[1] > now else None

    def last_error(self, key: LaunchKey) -> str:
        entry = self.entries.get(key)
        return entry[2] if entry else ""

    def failed(self, key: LaunchKey, now: datetime, error: str) -> int:
        failures = self.entries.get(key, (0, now, ""))[0] + 1
        due = now + timedelta(seconds=backoff_seconds(failures))
        self.entries[key] = (failures, due, error)
        return failures

    def clear(self, key: LaunchKey) -> None:
        self.entries.pop(key, None)

    def reset(self, uid: str) -> None:
        for key in [k for k in self.entries if k.uid == uid]:
            del self.entries[key]


@dataclass
class FleetPass:
    """State of one fleet pass."""

    deps: RelayDeps
    cr: dict[str, Any]
    spec: RelaySpec
    retries: RetryBook
    now: datetime
    uid: str
    old: list[Instance]
    spec_changed: bool
    tokens: dict[str, str] = field(default_factory=dict)
    tokens_dirty: bool = False
    busy: bool = False
    waits: list[float] = field(default_factory=list)
    report: HealthReport | None = None
    listings: dict[str, list[CloudInstance] | None] = field(default_factory=dict)


def drop_token(p: FleetPass, provider: str) -> None:
    if p.tokens.pop(provider, None) is not None:
        p.tokens_dirty = True


async def save_tokens(p: FleetPass) -> bool:
    try:
        await write_tokens(p.deps.kube, p.deps.namespace, p.tokens)
    except Exception as err:
        log.warning("cannot store relay VM tokens", extra=fields(error=str(err)))
        return False
    p.tokens_dirty = False
    return True


async def destroy_vm(p: FleetPass, provider: str, instance_id: str, region: str, why: str) -> bool:
    driver = p.deps.drivers.get(provider)
    if driver is None:
        log.warning(
            "no driver to destroy relay VM; manual cleanup required",
            extra=fields(provider=provider, instance=instance_id, region=region, reason=why),
        )
        return False
    try:
        await driver.destroy(instance_id, region)
    except Exception as err:
        log.warning(
            "destroying relay VM failed",
            extra=fields(provider=provider, instance=instance_id, reason=why, error=str(err)),
        )
        return False
    p.deps.destroyed.add(instance_id)
    log.info(
        "destroyed relay VM",
        extra=fields(provider=provider, instance=instance_id, region=region, reason=why),
    )
    return True
