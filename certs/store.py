"""The self-managed certificates' Secret: decoding, encoding, and optimistic writes.

One Secret holds everything, so a reader always sees a consistent set:

- ``ca.crt`` / ``ca.key``: the CA that signs new serving certificates;
- ``ca-bundle.crt``: the CAs the webhook configurations must trust (two during a rotation);
- ``tls.crt`` / ``tls.key``: the serving certificate every replica serves.

Annotations record when the current bundle was patched into the webhook configurations,
which is what the rotation waits on. Secret data is never logged; only fingerprints are.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

from cryptography import x509

from certs.build import (
    CertificateError,
    KeyMismatch,
    KeyPair,
    load_certificates,
    load_key_pair,
    pem_bundle,
)
from wspin.core.kinds import SECRETS
from wspin.core.objects import Obj
from wspin.kube.client import Kube

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
BUNDLE = "ca-bundle.crt"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"

PUBLISHED_SHA = "llmsafespaces.dev/ca-bundle-published-sha256"
"""SHA-256 of the bundle last patched into the webhook configurations."""
PUBLISHED_AT = "llmsafespaces.dev/ca-bundle-published-at"
"""When that patch succeeded (RFC 3339, UTC)."""

MANAGED_BY = {"app.kubernetes.io/managed-by": "wspin", "app.kubernetes.io/component": "webhook"}


@dataclass(frozen=True)
class Stored:
    """What the Secret holds, parsed; a part that is missing or unreadable is ``None``."""

    ca: KeyPair | None = None
    bundle: tuple[x509.Certificate, ...] = ()
    serving: KeyPair | None = None
    published_sha: str = ""
    published_at: datetime.datetime | None = None
    resource_version: str | None = None
    """None while the Secret does not exist (the next write creates it)."""
    problems: tuple[str, ...] = field(default=(), compare=False)
    """Why a part could not be read (for logs; the authority replaces such parts)."""
    serving_rejected: Literal["", "key-mismatch", "unreadable"] = field(default="", compare=False)
    """Why ``tls.crt``/``tls.key`` are present but gave no pair: ``key-mismatch`` or
    ``unreadable`` (the metric reasons of ``certs.validity``); empty otherwise."""
    source: Obj | None = field(default=None, compare=False, repr=False)
    """The Secret as read: its type, labels and annotations survive our writes."""

    @property
    def bundle_pem(self) -> bytes:
        return pem_bundle(list(self.bundle))

    @property
    def bundle_sha(self) -> str:
        return bundle_sha(self.bundle_pem)

    @property
    def published(self) -> bool:
        """The current bundle is what the webhook configurations were last patched with."""
        return (
            bool(self.bundle)
            and self.published_at is not None
            and self.published_sha == self.bundle_sha
        )


def bundle_sha(pem: bytes) -> str:
    return hashlib.sha256(pem).hexdigest()


def decode(secret: Obj) -> Stored:
    """Parse a Secret; every unreadable part is reported in ``problems``, never raised."""
    data: dict[str, Any] = secret.get("data") or {}
    annotations: dict[str, str] = secret.get("metadata", {}).get("annotations") or {}
    problems: list[str] = []

    def raw(key: str) -> bytes | None:
        value = data.get(key)
        if not value:
            problems.append(f"{key} is missing")
            return None
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            problems.append(f"{key} is not valid base64")
            return None

    mismatched: list[str] = []

    def pair(cert_key: str, key_key: str) -> KeyPair | None:
        cert_pem, key_pem = raw(cert_key), raw(key_key)
        if cert_pem is None or key_pem is None:
            return None
        try:
            return load_key_pair(cert_pem, key_pem, cert_key)[0]
        except CertificateError as err:
            problems.append(str(err))
            if isinstance(err, KeyMismatch):
                mismatched.append(cert_key)
            return None

    ca = pair(CA_CERT, CA_KEY)
    serving = pair(TLS_CERT, TLS_KEY)
    bundle: tuple[x509.Certificate, ...] = ()
    if (bundle_pem := raw(BUNDLE)) is not None:
        try:
            bundle = tuple(load_certificates(bundle_pem, BUNDLE))
        except CertificateError as err:
            problems.append(str(err))

    published_at = None
    if stamp := annotations.get(PUBLISHED_AT):
        try:
            published_at = datetime.datetime.fromisoformat(stamp)
        except ValueError:
            problems.append(f"annotation {PUBLISHED_AT} is not a timestamp")

    return Stored(
        ca=ca,
        bundle=bundle,
        serving=serving,
        published_sha=annotations.get(PUBLISHED_SHA, ""),
        published_at=published_at if published_at and published_at.tzinfo else None,
        resource_version=secret.get("metadata", {}).get("resourceVersion"),
        problems=tuple(problems),
        serving_rejected=(
            "key-mismatch"
            if TLS_CERT in mismatched
            else "unreadable"
            if serving is None and (TLS_CERT in data or TLS_KEY in data)
            else ""
        ),
        source=secret,
    )


def encode(stored: Stored, name: str, namespace: str) -> Obj:
    """The Secret object for ``stored`` (carrying its resourceVersion, if any)."""
    data: dict[str, bytes] = {BUNDLE: stored.bundle_pem}
    if stored.ca is not None:
        data[CA_CERT], data[CA_KEY] = stored.ca.cert_pem, stored.ca.key_pem
    if stored.serving is not None:
        data[TLS_CERT], data[TLS_KEY] = stored.serving.cert_pem, stored.serving.key_pem
    previous = stored.source or {}
    old_meta: Obj = previous.get("metadata") or {}
    annotations = {
        k: v
        for k, v in (old_meta.get("annotations") or {}).items()
        if k not in (PUBLISHED_SHA, PUBLISHED_AT)
    }
    if stored.published_sha and stored.published_at:
        annotations[PUBLISHED_SHA] = stored.published_sha
        annotations[PUBLISHED_AT] = stored.published_at.isoformat()
    metadata: Obj = {
        "name": name,
        "namespace": namespace,
        "labels": {**(old_meta.get("labels") or {}), **MANAGED_BY},
        "annotations": annotations,
    }
    if stored.resource_version is not None:
        metadata["resourceVersion"] = stored.resource_version
    return {
        "metadata": metadata,
        # A Secret's type is immutable: keep one created by someone else (e.g. the chart).
        "type": previous.get("type", "Opaque"),
        "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
    }


class SecretStore:
    """Reads and writes the one Secret; a write with a stale resourceVersion raises Conflict."""

    def __init__(self, kube: Kube, namespace: str, name: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name

    async def read(self) -> Stored:
        secret = await self.kube.get_or_none(SECRETS, self.name, self.namespace)
        return Stored() if secret is None else decode(secret)

    async def write(self, stored: Stored) -> Stored:
        """Create (no resourceVersion) or replace; returns what the API server stored."""
        body = encode(stored, self.name, self.namespace)
        if stored.resource_version is None:
            written = await self.kube.create(SECRETS, body, self.namespace)
        else:
            written = await self.kube.replace(SECRETS, body)
        return decode(written)
