"""The direct client for Secrets in the relay namespace, and the shapes of the two Secrets the
controller relies on there.

Direct (no informer cache) for two reasons: arming runs before the manager's caches start,
and the chart grants only name-scoped ``get`` on ``llm-relay-hpke-pub`` and
``llm-relay-mint-key`` plus blind create/update and label-selected deletecollection, never
list or watch, so a cache could not be filled anyway.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from dataclasses import dataclass

from controller.types import Obj
from wspin.core.errors import AlreadyExists, KubeAPIError, WspinError
from wspin.core.kinds import SECRETS
from wspin.kube.client import Kube

HPKE_PUB_SECRET = "llm-relay-hpke-pub"  # noqa: S105 - a Secret name
"""The router's public key (router-owned; the controller only reads it)."""
HPKE_PUB_PAYLOAD_KEY = "payload"
MINT_KEY_SECRET = "llm-relay-mint-key"  # noqa: S105 - a Secret name
"""Bearer credential for the router's internal API and the router's token HMAC key."""
MINT_KEY_DATA_KEY = "mint-key"
MINT_KEY_LENGTH = 43
"""Lowercase hex characters in a generated mint key (about 172 bits from the CSPRNG)."""


class RelaySecretError(WspinError):
    """A relay-namespace Secret is missing, unreadable or malformed."""


@dataclass(frozen=True)
class HpkePublicKey:
    """The router's current public key and its generation (keyID ``hpke-g<generation>``)."""

    public_key: bytes
    generation: int

    @property
    def key_id(self) -> str:
        return f"hpke-g{self.generation}"


class RelaySecrets:
    """Secret access in one namespace: get, create and update by name, delete by label
    selector (``deletecollection``). No list."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace

    async def get(self, name: str) -> Obj | None:
        return await self.kube.get_or_none(SECRETS, name, self.namespace)

    async def create(self, secret: Obj) -> Obj:
        secret.setdefault("metadata", {})["namespace"] = self.namespace
        return await self.kube.create(SECRETS, secret, self.namespace)

    async def update(self, secret: Obj) -> Obj:
        secret.setdefault("metadata", {})["namespace"] = self.namespace
        return await self.kube.replace(SECRETS, secret)

    async def delete_selected(self, labels: str) -> list[Obj]:
        """Delete the Secrets the label selector ``labels`` selects; the ones deleted."""
        return await self.kube.delete_collection(SECRETS, self.namespace, labels=labels)


def secret_value(secret: Obj, key: str) -> bytes | None:
    """The decoded ``data[key]`` (or ``stringData[key]``), None when absent."""
    raw = (secret.get("data") or {}).get(key)
    if raw is not None:
        try:
            return base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            return None
    text = (secret.get("stringData") or {}).get(key)
    return text.encode() if isinstance(text, str) else None


def parse_hpke_pub(secret: Obj) -> HpkePublicKey:
    """Check the public-key Secret's shape: JSON ``{publicKey: base64, generation: int ≥ 1}``.

    The key bytes are not checked as an X25519 key here; a bad key fails at seal time.
    """
    where = f"Secret {HPKE_PUB_SECRET} key {HPKE_PUB_PAYLOAD_KEY!r}"
    payload = secret_value(secret, HPKE_PUB_PAYLOAD_KEY)
    if not payload:
        raise RelaySecretError(f"{where} is missing or empty")
    try:
        decoded = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as err:
        raise RelaySecretError(f"{where} is not JSON: {err}") from None
    if not isinstance(decoded, dict):
        raise RelaySecretError(f"{where} is not a JSON object")
    generation = decoded.get("generation")
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 1:
        raise RelaySecretError(f"{where}: generation must be an integer ≥ 1, got {generation!r}")
    raw_key = decoded.get("publicKey")
    try:
        key = base64.b64decode(raw_key, validate=True) if isinstance(raw_key, str) else b""
    except (binascii.Error, ValueError):
        raise RelaySecretError(f"{where}: publicKey is not base64") from None
    if not key:
        raise RelaySecretError(f"{where}: publicKey is missing or empty")
    return HpkePublicKey(key, generation)


def new_mint_key() -> str:
    return secrets.token_hex((MINT_KEY_LENGTH + 1) // 2)[:MINT_KEY_LENGTH]


async def ensure_mint_key(reader: RelaySecrets, writer: RelaySecrets) -> str:
    """Adopt the existing mint key or create one, so the first mint never races the router's
    lazy read. Reads through ``reader``, creates through ``writer`` (both direct clients).
    Returns the key; never logs it."""
    existing = await reader.get(MINT_KEY_SECRET)
    if existing is None:
        secret: Obj = {
            "metadata": {
                "name": MINT_KEY_SECRET,
                "labels": {"app.kubernetes.io/managed-by": "wspin-controller"},
            },
            "type": "Opaque",
            "data": {MINT_KEY_DATA_KEY: base64.b64encode(new_mint_key().encode()).decode()},
        }
        try:
            existing = await writer.create(secret)
        except AlreadyExists:  # another replica created it first: adopt theirs
            existing = await reader.get(MINT_KEY_SECRET)
            if existing is None:
                raise RelaySecretError(
                    f"Secret {MINT_KEY_SECRET} vanished right after a create conflict"
                ) from None
    value = secret_value(existing, MINT_KEY_DATA_KEY)
    if not value:
        raise RelaySecretError(
            f"Secret {MINT_KEY_SECRET} exists but its {MINT_KEY_DATA_KEY!r} key is empty",
            f"delete Secret {MINT_KEY_SECRET} so the controller recreates it",
        )
    return value.decode(errors="replace")


async def read_hpke_pub(relay: RelaySecrets) -> tuple[HpkePublicKey | None, str]:
    """The router's public key, read directly each pass (a rotation is seen at once)."""
    where = f"Secret {relay.namespace}/{HPKE_PUB_SECRET}"
    try:
        secret = await relay.get(HPKE_PUB_SECRET)
    except KubeAPIError as err:
        return None, f"{where} unreadable: {err}"
    if secret is None:
        return None, f"{where} not found: router not bootstrapped, or KMS mode not yet wired"
    try:
        return parse_hpke_pub(secret), ""
    except RelaySecretError as err:
        return None, f"{where} is shape-invalid: {err.message} (seal-time parse fails loudly)"
