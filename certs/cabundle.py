"""Patching the CA bundle into the webhook configurations, idempotently.

Every webhook entry of each named configuration gets the bundle; a configuration that
already carries it is not written at all (no resourceVersion churn, no audit noise). Writes
are conditional on the resourceVersion read, so a concurrent ``helm upgrade`` is re-read and
re-applied rather than overwritten.
"""

from __future__ import annotations

import base64
import binascii
import copy
from dataclasses import dataclass

from wspin.core.errors import Conflict
from wspin.core.kinds import MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS, Resource
from wspin.core.objects import Obj
from wspin.kube.client import Kube

ATTEMPTS = 5
"""Conflicting writes retried before giving up (each retry re-reads the configuration)."""


@dataclass(frozen=True)
class Target:
    """One webhook configuration to patch (both kinds are cluster scoped)."""

    resource: Resource
    name: str


def targets(mutating: str | None, validating: str | None) -> list[Target]:
    """The configurations named, skipping empty names."""
    found = []
    if mutating:
        found.append(Target(MUTATING_WEBHOOKS, mutating))
    if validating:
        found.append(Target(VALIDATING_WEBHOOKS, validating))
    return found


def with_ca_bundle(config: Obj, bundle_pem: bytes) -> Obj | None:
    """``config`` with ``bundle_pem`` on every webhook entry; None when nothing changes."""
    updated = copy.deepcopy(config)
    encoded = base64.b64encode(bundle_pem).decode()
    changed = False
    for entry in updated.get("webhooks") or []:
        client = entry.setdefault("clientConfig", {})
        if _decoded(client.get("caBundle")) != bundle_pem:
            client["caBundle"] = encoded
            changed = True
    return updated if changed else None


async def patch_ca_bundle(kube: Kube, bundle_pem: bytes, configs: list[Target]) -> list[str]:
    """Set ``bundle_pem`` on every entry of ``configs``; returns the names actually written.

    Raises the ``KubeAPIError`` family: ``NotFound`` when a configuration does not exist,
    ``Conflict`` when it kept changing under us for ``ATTEMPTS`` writes.
    """
    written = []
    for target in configs:
        if await _patch_one(kube, bundle_pem, target):
            written.append(target.name)
    return written


async def _patch_one(kube: Kube, bundle_pem: bytes, target: Target) -> bool:
    conflicts = 0
    while True:
        config = await kube.get(target.resource, target.name)
        updated = with_ca_bundle(config, bundle_pem)
        if updated is None:
            return False
        try:
            await kube.replace(target.resource, updated)
        except Conflict:
            conflicts += 1
            if conflicts >= ATTEMPTS:
                raise
            continue
        return True


def _decoded(value: object) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
