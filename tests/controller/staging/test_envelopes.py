"""The HPKE envelope: format, round trip with the router's private key, AAD binding."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from controller.staging.envelopes import (
    ENC_LENGTH,
    INFO,
    SUITE,
    EnvelopeError,
    Sealer,
    new_keypair,
    open_envelope,
    split,
)


@pytest.fixture(scope="module")
def keys() -> tuple[bytes, bytes]:
    return new_keypair()


def test_an_envelope_has_the_versioned_header_and_an_hpke_payload(
    keys: tuple[bytes, bytes],
) -> None:
    envelope = Sealer(keys[1], "hpke-g2").seal(b"sk-live-123")
    head, key_id, payload = split(envelope)
    assert head == "stg:v1:hpke:hpke-g2" and key_id == "hpke-g2"
    assert envelope.startswith("stg:v1:hpke:hpke-g2:")
    assert len(payload) == ENC_LENGTH + len(b"sk-live-123") + 16  # enc ‖ ciphertext ‖ tag
    assert base64.b64encode(payload).decode() == envelope.rpartition(":")[2]


def test_a_sealed_key_opens_with_the_private_key_to_the_original(
    keys: tuple[bytes, bytes],
) -> None:
    envelope = Sealer(keys[1], "hpke-g7").seal("ключ-sk/+=".encode())
    assert open_envelope(keys[0], envelope) == "ключ-sk/+=".encode()


def test_the_suite_is_x25519_hkdf_sha256_aes128gcm_with_the_staging_info(
    keys: tuple[bytes, bytes],
) -> None:
    """Opened by hand with the RFC 9180 primitives, independent of ``open_envelope``."""
    envelope = Sealer(keys[1], "hpke-g2").seal(b"plain")
    head, _, payload = split(envelope)
    recipient = SUITE.kem.deserialize_private_key(keys[0])
    context = SUITE.create_recipient_context(payload[:32], recipient, info=INFO)
    assert context.open(payload[32:], aad=head.encode()) == b"plain"
    assert INFO == b"llmsafespaces-staging-hpke-v1"


def _labeled_extract(suite_id: bytes, salt: bytes, label: bytes, ikm: bytes) -> bytes:
    return hmac.new(salt, b"HPKE-v1" + suite_id + label + ikm, hashlib.sha256).digest()


def _labeled_expand(suite_id: bytes, prk: bytes, label: bytes, info: bytes, length: int) -> bytes:
    labeled = length.to_bytes(2, "big") + b"HPKE-v1" + suite_id + label + info
    return HKDFExpand(hashes.SHA256(), length, labeled).derive(prk)


def _rfc9180_open(private_key: bytes, envelope: str) -> bytes:
    """RFC 9180 base mode, DHKEM(X25519, HKDF-SHA256) / HKDF-SHA256 / AES-128-GCM, written
    out from the RFC on ``cryptography``'s primitives: no pyhpke and none of our constants."""
    head, _, encoded = envelope.rpartition(":")
    payload = base64.b64decode(encoded)
    enc, ciphertext = payload[:32], payload[32:]
    recipient = X25519PrivateKey.from_private_bytes(private_key)
    public = recipient.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    dh = recipient.exchange(X25519PublicKey.from_public_bytes(enc))
    kem = b"KEM\x00\x20"
    eae_prk = _labeled_extract(kem, b"", b"eae_prk", dh)
    shared = _labeled_expand(kem, eae_prk, b"shared_secret", enc + public, 32)
    suite = b"HPKE\x00\x20\x00\x01\x00\x01"
    psk_id_hash = _labeled_extract(suite, b"", b"psk_id_hash", b"")
    info_hash = _labeled_extract(suite, b"", b"info_hash", b"llmsafespaces-staging-hpke-v1")
    context = b"\x00" + psk_id_hash + info_hash
    secret = _labeled_extract(suite, shared, b"secret", b"")
    key = _labeled_expand(suite, secret, b"key", context, 16)
    nonce = _labeled_expand(suite, secret, b"base_nonce", context, 12)
    return AESGCM(key).decrypt(nonce, ciphertext, head.encode())


def test_an_envelope_opens_with_an_independent_rfc_9180_implementation(
    keys: tuple[bytes, bytes],
) -> None:
    envelope = Sealer(keys[1], "hpke-g4").seal(b"sk-cross-check")
    assert envelope.startswith("stg:v1:hpke:hpke-g4:")
    assert _rfc9180_open(keys[0], envelope) == b"sk-cross-check"
    with pytest.raises(InvalidTag):  # the header is the AAD
        _rfc9180_open(keys[0], envelope.replace("hpke-g4", "hpke-g5", 1))


def test_sealing_twice_gives_different_envelopes(keys: tuple[bytes, bytes]) -> None:
    sealer = Sealer(keys[1], "hpke-g2")
    assert sealer.seal(b"same") != sealer.seal(b"same")


@pytest.mark.parametrize(
    "tamper",
    [
        lambda e: e.replace("hpke-g2", "hpke-g3", 1),
        lambda e: e.replace("stg:v1:", "stg:v2:", 1),
        lambda e: e[:-4] + ("AAAA" if not e.endswith("AAAA") else "BBBB"),
    ],
    ids=["keyID", "version", "ciphertext"],
)
def test_a_tampered_envelope_does_not_open(keys: tuple[bytes, bytes], tamper: object) -> None:
    envelope = Sealer(keys[1], "hpke-g2").seal(b"sk-live-123")
    assert callable(tamper)
    with pytest.raises(EnvelopeError):
        open_envelope(keys[0], tamper(envelope))


def test_another_private_key_does_not_open_it(keys: tuple[bytes, bytes]) -> None:
    envelope = Sealer(keys[1], "hpke-g2").seal(b"sk-live-123")
    with pytest.raises(EnvelopeError, match="does not open"):
        open_envelope(new_keypair()[0], envelope)


@pytest.mark.parametrize("key_id", ["", "hpke:g2"])
def test_a_key_id_must_be_non_empty_and_colon_free(keys: tuple[bytes, bytes], key_id: str) -> None:
    with pytest.raises(EnvelopeError, match="keyID"):
        Sealer(keys[1], key_id)


def test_an_empty_plaintext_is_refused(keys: tuple[bytes, bytes]) -> None:
    with pytest.raises(EnvelopeError, match="empty plaintext"):
        Sealer(keys[1], "hpke-g2").seal(b"")


def test_a_public_key_that_is_not_x25519_fails_naming_the_key_id() -> None:
    with pytest.raises(EnvelopeError, match="hpke-g4 is not an X25519 key"):
        Sealer(b"dummy-x25519-public-key", "hpke-g4")


@pytest.mark.parametrize(
    "text", ["", "stg:v1:aes-256-gcm:k:AAAA", "stg:v1:hpke:hpke-g2:%%%", "stg:v1:hpke:hpke-g2:QUFB"]
)
def test_malformed_envelopes_are_named(text: str) -> None:
    with pytest.raises(EnvelopeError):
        split(text)
