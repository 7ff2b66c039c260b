"""The sealed key envelope: ``stg:v1:hpke:<keyID>:<base64(enc ‖ ciphertext)>``.

RFC 9180 HPKE in base mode with DHKEM(X25519, HKDF-SHA256), HKDF-SHA256 and AES-128-GCM
(pyhpke, on cryptography). The controller seals to the router's public key, so it cannot read
back what it wrote; only the router, holding the private key, opens an envelope. The header
``stg:v1:hpke:<keyID>`` is the AAD: a ciphertext moved under another version, algorithm or
keyID fails to open instead of being tried with the wrong key.

Pure: no I/O, no logging. ``open_envelope`` exists for the router side (the fake router and
tests); the controller never calls it.
"""

from __future__ import annotations

import base64
import binascii
from typing import Final

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)
from pyhpke import AEADId, CipherSuite, KDFId, KEMId, KEMKeyInterface, PyHPKEError

from wspin.errors import WspinError

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
