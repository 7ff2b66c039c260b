"""Patching the CA bundle into the webhook configurations, idempotently, and reading whether
they trust a served certificate.

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

from cryptography import x509

from certs.build import CertificateError, load_certificates, signed_by
from wspin.core.errors import Conflict, NotFound
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


def with_ca_bundle(config: Obj, bundle_pem: bytes, *, fill_only: bool = False) -> Obj | None:
    """``config`` with ``bundle_pem`` on every webhook entry (``fill_only``: on every entry
    that carries no bundle at all); None when nothing changes."""
    updated = copy.deepcopy(config)
    encoded = base64.b64encode(bundle_pem).decode()
    changed = False
    for entry in updated.get("webhooks") or []:
        client = entry.setdefault("clientConfig", {})
        current = _decoded(client.get("caBundle"))
        if fill_only and current:
            continue
        if current != bundle_pem:
            client["caBundle"] = encoded
            changed = True
    return updated if changed else None


def trusts(config: Obj, leaf: x509.Certificate) -> bool:
    """Every webhook entry of ``config`` carries a CA that signed ``leaf``: the API server
    can call this webhook serving ``leaf`` through any of them."""
    return all(_entry_trusts(entry, leaf) for entry in config.get("webhooks") or [])


def _entry_trusts(entry: object, leaf: x509.Certificate) -> bool:
    client = entry.get("clientConfig") if isinstance(entry, dict) else None
    bundle = _decoded(client.get("caBundle")) if isinstance(client, dict) else None
    if not bundle:
        return False
    try:
        cas = load_certificates(bundle, "caBundle")
    except CertificateError:
        return False
    return any(signed_by(leaf, ca) for ca in cas)


async def untrusting(
    kube: Kube, leaf: x509.Certificate, configs: list[Target]
) -> list[tuple[Target, str]]:
    """The configurations through which the API server cannot call a webhook serving
    ``leaf`` yet, each with why ("not found", or no CA that signed it). Other API errors
    are raised (the ``KubeAPIError`` family)."""
    found = []
    for target in configs:
        try:
            config = await kube.get(target.resource, target.name)
        except NotFound:
            found.append((target, "not found"))
            continue
        if not trusts(config, leaf):
            found.append((target, "no CA that signed the served certificate"))
    return found


async def patch_ca_bundle(
    kube: Kube, bundle_pem: bytes, configs: list[Target], *, fill_only: bool = False
) -> list[str]:
    """Set ``bundle_pem`` on every entry of ``configs`` (``fill_only``: on entries without
    a bundle); returns the names actually written.

    Raises the ``KubeAPIError`` family: ``NotFound`` when a configuration does not exist,
    ``Conflict`` when it kept changing under us for ``ATTEMPTS`` writes.
    """
    written = []
    for target in configs:
        if await _patch_one(kube, bundle_pem, target, fill_only):
            written.append(target.name)
    return written


async def _patch_one(kube: Kube, bundle_pem: bytes, target: Target, fill_only: bool) -> bool:
    conflicts = 0
    while True:
        config = await kube.get(target.resource, target.name)
        updated = with_ca_bundle(config, bundle_pem, fill_only=fill_only)
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
