"""Envelopes: a provider key sealed to the router, the Secret that carries it, and its revocation.

The envelope is ``stg:v1:hpke:<keyID>:<base64(enc ‖ ciphertext)>``: RFC 9180 HPKE in base mode
with DHKEM(X25519, HKDF-SHA256), HKDF-SHA256 and AES-128-GCM (pyhpke, on cryptography). The
controller seals to the router's public key, so it cannot read back what it wrote; only the
router, holding the private key, opens an envelope. The header ``stg:v1:hpke:<keyID>`` is the
AAD: a ciphertext moved under another version, algorithm or keyID fails to open instead of
being tried with the wrong key. ``open_envelope`` exists for the router side (the fake router
and tests); the controller never calls it.

Its Secret, ``llm-relay-env-<workspace>-<slug>`` in the relay namespace, is labelled with the
workspace and the provider slug (the router's informer ignores Secrets lacking either) and with
the owning Workspace's namespace and uid; it has no owner reference (owners across namespaces
are illegal), so its lifetime is managed here: revocation and termination delete it. Written
blind and never read back: the chart grants create, update and deletecollection there, never
get. Deletion selects by the owner's uid and slug labels, never by name (``delete_envelope``),
and the chart's policy lets the controller delete in the relay namespace only what carries
its labels and never move an envelope from one owner to another.

Revocation is the delete: the router evicts the envelope and the next request with that
provider's token fails closed. A failed delete keeps the slug in the bookkeeping so the next
pass retries, and the message says the envelope is RETAINED: it never claims a deletion that
did not happen.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import re
from dataclasses import dataclass, field
from typing import Final

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)
from pyhpke import AEADId, CipherSuite, KDFId, KEMId, KEMKeyInterface, PyHPKEError

from controller.staging.desired import Bookkeeping, DesiredProvider, Staged, go_json
from controller.staging.ownership import LABEL_WORKSPACE_UID, owner_labels
from controller.staging.secrets import RelaySecrets
from controller.types import Obj
from wspin.core.errors import AlreadyExists, KubeAPIError, UnsafeName, WspinError
from wspin.core.logs import fields
from wspin.core.redact import Redactor

log = logging.getLogger("controller.staging")

PREFIX: Final = "stg:v1:hpke"
INFO: Final = b"llmsafespaces-staging-hpke-v1"
ENC_LENGTH: Final = 32
"""The encapsulated key's length for X25519."""

SUITE: Final = CipherSuite.new(KEMId.DHKEM_X25519_HKDF_SHA256, KDFId.HKDF_SHA256, AEADId.AES128_GCM)


class EnvelopeError(WspinError):
    """An envelope cannot be sealed or opened; the message never contains key material."""


def header(key_id: str) -> str:
    """``stg:v1:hpke:<keyID>``; the keyID must be non-empty and free of colons."""
    if not key_id or ":" in key_id:
        raise EnvelopeError(f"keyID {key_id!r} must be non-empty and must not contain ':'")
    return f"{PREFIX}:{key_id}"


class Sealer:
    """Seals plaintexts to one public key under one keyID (deserialised once per pass)."""

    def __init__(self, public_key: bytes, key_id: str) -> None:
        self.key_id = key_id
        self.header = header(key_id)
        try:
            self._recipient: KEMKeyInterface = SUITE.kem.deserialize_public_key(public_key)
        except (ValueError, PyHPKEError) as err:
            raise EnvelopeError(
                f"the public key for {key_id} is not an X25519 key: {err}"
            ) from None

    def seal(self, plaintext: bytes) -> str:
        """A fresh envelope (a new ephemeral key each call, so equal inputs differ)."""
        if not plaintext:
            raise EnvelopeError("refusing to seal an empty plaintext")
        aad = self.header.encode()
        try:
            # Single-shot seal (RFC 9180 §6.1) = a fresh sender context sealing once; pyhpke
            # implements the contexts but not the one-call form.
            enc, context = SUITE.create_sender_context(self._recipient, info=INFO)
            ciphertext = context.seal(plaintext, aad=aad)
        except PyHPKEError as err:
            raise EnvelopeError(f"HPKE seal under {self.key_id} failed: {err}") from None
        return f"{self.header}:{base64.b64encode(enc + ciphertext).decode()}"


def split(envelope: str) -> tuple[str, str, bytes]:
    """(header, keyID, payload) of an envelope, or ``EnvelopeError`` naming what is wrong."""
    head, sep, encoded = envelope.rpartition(":")
    if not sep or not head.startswith(PREFIX + ":"):
        raise EnvelopeError(f"not an envelope: it must start with {PREFIX}:<keyID>:")
    key_id = head[len(PREFIX) + 1 :]
    header(key_id)
    try:
        payload = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise EnvelopeError("the envelope payload is not standard base64") from None
    if len(payload) <= ENC_LENGTH:
        raise EnvelopeError("the envelope payload is too short to hold a ciphertext")
    return head, key_id, payload


def open_envelope(private_key: bytes, envelope: str) -> bytes:
    """The plaintext; fails when the key, the header (AAD) or the ciphertext do not match."""
    head, _, payload = split(envelope)
    try:
        recipient = SUITE.kem.deserialize_private_key(private_key)
        context = SUITE.create_recipient_context(payload[:ENC_LENGTH], recipient, info=INFO)
        return context.open(payload[ENC_LENGTH:], aad=head.encode())
    except (ValueError, PyHPKEError) as err:
        raise EnvelopeError(f"the envelope does not open: {type(err).__name__}") from None


def new_keypair() -> tuple[bytes, bytes]:
    """(private, public) raw X25519 key bytes, as the router generates them."""
    key = X25519PrivateKey.generate()
    private = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return private, public


ENVELOPE_KEY: Final = "envelope"
MODELS_KEY: Final = "models"
LABEL_WORKSPACE_ID: Final = "llmsafespaces.dev/workspace-id"
LABEL_PROVIDER_SLUG: Final = "llmsafespaces.dev/provider-slug"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "wspin-controller"


def envelope_name(workspace: str, slug: str) -> str:
    return f"llm-relay-env-{workspace}-{slug}"


def envelope_secret(
    workspace: str, slug: str, envelope: str, models: list[str], owner: dict[str, str]
) -> Obj:
    """The envelope Secret; ``owner`` is the owning Workspace's namespace and uid labels."""
    return {
        "metadata": {
            "name": envelope_name(workspace, slug),
            "labels": {
                LABEL_WORKSPACE_ID: workspace,
                LABEL_PROVIDER_SLUG: slug,
                LABEL_MANAGED_BY: MANAGED_BY,
                **owner,
            },
        },
        "type": "Opaque",
        "data": {
            ENVELOPE_KEY: base64.b64encode(envelope.encode()).decode(),
            MODELS_KEY: base64.b64encode(go_json(models).encode()).decode(),
        },
    }


async def write_envelope(secrets: RelaySecrets, body: Obj) -> None:
    """Create, or replace whatever holds the name: blind, without a read.

    Never delete-then-create: the router would see a moment without an envelope, and a
    request in that moment would fail closed for nothing. Only the identity's owner calls
    this (``ownership``), so the replace never overwrites another tenant's envelope.
    """
    try:
        await secrets.create(dict(body))
    except AlreadyExists:
        await secrets.update(dict(body))


_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")


def _label_value(value: str, what: str) -> str:
    """``value`` when it can stand in a label selector as itself; ``UnsafeName`` otherwise
    (a selector built from ``,``, ``=`` or ``!`` would select other objects than it names)."""
    if not _LABEL_VALUE.match(value):
        raise UnsafeName(f"refusing {what} {value!r} in a label selector: not a label value")
    return value


def owned_selector(uid: str, slug: str | None = None) -> str:
    """The envelopes of the Workspace with ``uid`` (only ``slug``'s when given)."""
    selector = f"{LABEL_WORKSPACE_UID}={_label_value(uid, 'workspace uid')},{LABEL_PROVIDER_SLUG}"
    return f"{selector}={_label_value(slug, 'provider slug')}" if slug is not None else selector


def unbound_selector(owner: str, wanted: list[str]) -> str:
    """``owner`` (a selector for one Workspace's envelopes) narrowed to the slugs not in
    ``wanted``."""
    if not wanted:
        return owner
    kept = ",".join(_label_value(slug, "provider slug") for slug in sorted(wanted))
    return f"{owner},{LABEL_PROVIDER_SLUG} notin ({kept})"


def legacy_selector(workspace: str) -> str:
    """Envelopes of the relay identity ``workspace`` that carry no owner uid: written by the
    first release, which labelled envelopes with the workspace name and slug only."""
    name = _label_value(workspace, "workspace name")
    return (
        f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_WORKSPACE_ID}={name},"
        f"!{LABEL_WORKSPACE_UID},{LABEL_PROVIDER_SLUG}"
    )


async def delete_envelope(secrets: RelaySecrets, uid: str, slug: str) -> list[str]:
    """Delete ``slug``'s envelope of the Workspace with ``uid``, selected by those labels, never
    by name: the name ``llm-relay-env-<workspace>-<slug>`` is ambiguous (``w`` + ``prod-openai``
    and ``w-prod`` + ``openai`` meet), the labels are not. An envelope already gone counts as
    deleted. The slugs deleted."""
    return slugs_of(await secrets.delete_selected(owned_selector(uid, slug)))


async def sweep_unbound(
    secrets: RelaySecrets, workspace: str, uid: str, wanted: list[str]
) -> list[str]:
    """Delete every envelope of the Workspace (``uid``) whose slug is not in ``wanted``, and
    those of its relay identity an earlier release wrote without an owner uid; the slugs
    deleted. Needs no record of what was staged, so no record can widen it."""
    deleted = await secrets.delete_selected(unbound_selector(owned_selector(uid), wanted))
    deleted += await secrets.delete_selected(unbound_selector(legacy_selector(workspace), wanted))
    return slugs_of(deleted)


def slugs_of(deleted: list[Obj]) -> list[str]:
    """The provider slugs of deleted envelopes, sorted."""
    found = {
        str(((item.get("metadata") or {}).get("labels") or {}).get(LABEL_PROVIDER_SLUG) or "")
        for item in deleted
    }
    return sorted(found - {""})


@dataclass
class Revocation:
    """The outcome of one pass's revocations."""

    revoked: list[str] = field(default_factory=list)
    retained: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.revoked or self.retained)

    @property
    def incomplete(self) -> bool:
        return bool(self.retained)

    def message(self) -> str:
        parts = []
        if self.revoked:
            parts.append(
                f"provider(s) {', '.join(self.revoked)} unbound: envelope deleted; in-flight "
                "tokens fail closed until the pod applies the removal"
            )
        if self.retained:
            parts.append(
                f"revocation INCOMPLETE for {', '.join(self.retained)}: envelope RETAINED "
                "(delete failed, retrying)"
            )
        return "; ".join(parts)


async def revoke(
    workspace: str,
    uid: str,
    slugs: list[str],
    *,
    secrets: RelaySecrets,
    bookkeeping: Bookkeeping,
    redactor: Redactor,
) -> Revocation:
    """Delete each slug's envelope of the Workspace with ``uid`` (``delete_envelope``: by its
    owner and slug labels); ``bookkeeping`` loses the slugs that are gone."""
    outcome = Revocation()
    for slug in slugs:
        try:
            await delete_envelope(secrets, uid, slug)
        except KubeAPIError as err:
            log.error(
                "revocation delete failed — envelope retained, retrying",
                extra=fields(
                    workspace=workspace,
                    provider=slug,
                    envelope=envelope_name(workspace, slug),
                    error=str(err),
                ),
            )
            outcome.retained.append(slug)
            outcome.errors.append(f"{slug}: {err}")
            continue
        staged = bookkeeping.pop(slug, None)
        if staged is not None:
            redactor.unregister(staged.redaction_id)
        outcome.revoked.append(slug)
    return outcome


REDACTION_GROUP_PREFIX: Final = "staged:"


def redaction_group(envelope: str) -> str:
    """The redactor group of a staged key: ``staged:`` + unpadded base64url of the first 12
    bytes of SHA-256(envelope). Recorded as ``redactionID`` in the bookkeeping, so a later
    pass (or process) can drop the key from the redactor when its envelope goes."""
    digest = hashlib.sha256(envelope.encode()).digest()[:12]
    return REDACTION_GROUP_PREFIX + base64.urlsafe_b64encode(digest).decode().rstrip("=")


async def seal(
    relay: RelaySecrets,
    redactor: Redactor,
    ws: Obj,
    want: DesiredProvider,
    sealer: Sealer,
    bookkeeping: Bookkeeping,
) -> None:
    """Seal ``want``'s key, write its envelope (owner labels on it) and record it in
    ``bookkeeping``. The key is registered with the redactor before anything can echo
    it; the superseded envelope's group leaves once the new one is written."""
    workspace = ws["metadata"]["name"]
    envelope = sealer.seal(want.credential.api_key.encode())
    group = redaction_group(envelope)
    redactor.register(group, want.credential.api_key)  # before anything can echo it
    try:
        await write_envelope(
            relay,
            envelope_secret(workspace, want.slug, envelope, want.models, owner_labels(ws)),
        )
    except BaseException:
        # Not staged: the retry seals a new envelope with a group of its own.
        redactor.unregister(group)
        raise
    previous = bookkeeping.get(want.slug)
    if previous is not None and previous.redaction_id != group:
        redactor.unregister(previous.redaction_id)
    bookkeeping[want.slug] = Staged(want.key_digest, sealer.key_id, want.models_digest, group)
