"""The ``relay-vm-tokens`` Secret: the shared token each relay VM booted with, per provider.

Tokens must outlive the controller process: a running VM keeps the token it booted with,
and relay-proxy answers 401 to any other. The token is written here *before* the VM is
launched, so a crash between launch and the write cannot strand a VM with a token nobody
knows. A replaced or rotated VM gets a fresh token (its provider's entry is dropped first).
Token values never reach a log line, an event or an error message.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Mapping
from typing import Final

from wspin.resources import SECRETS, Kube

TOKENS_SECRET: Final = "relay-vm-tokens"  # noqa: S105 (a Secret name)
TOKEN_BYTES: Final = 32


def generate_token() -> str:
    """32 random bytes as 64 lowercase hex characters."""
    return secrets.token_hex(TOKEN_BYTES)


async def read_tokens(kube: Kube, namespace: str) -> dict[str, str]:
    """provider → token; empty when the Secret does not exist; empty values are skipped."""
    secret = await kube.get_or_none(SECRETS, TOKENS_SECRET, namespace)
    if secret is None:
        return {}
    tokens = {}
    for provider, encoded in (secret.get("data") or {}).items():
        value = base64.b64decode(encoded).decode() if encoded else ""
        if value:
            tokens[provider] = value
    return tokens


async def write_tokens(kube: Kube, namespace: str, tokens: Mapping[str, str]) -> None:
    """Replace the whole data map with ``tokens`` (create the Secret when missing)."""
    data = {
        provider: base64.b64encode(token.encode()).decode() for provider, token in tokens.items()
    }
    secret = await kube.get_or_none(SECRETS, TOKENS_SECRET, namespace)
    if secret is None:
        await kube.create(
            SECRETS,
            {
                "metadata": {"name": TOKENS_SECRET, "namespace": namespace},
                "type": "Opaque",
                "data": data,
            },
            namespace,
        )
        return
    if (secret.get("data") or {}) == data:
        return
    secret["data"] = data
    secret.pop("stringData", None)
    await kube.replace(SECRETS, secret)
