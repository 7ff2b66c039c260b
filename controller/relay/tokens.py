"""The ``relay-vm-tokens`` Secret: the shared token each relay VM booted with, by token key
(the provider's name, or ``<provider>.2`` for the second VM a slot runs while one replaces
the other; ``entries.token_key``).

Tokens must outlive the controller process: a running VM keeps the token it booted with,
and relay-proxy answers 401 to any other. The token is written here *before* the VM is
launched, so a crash between launch and the write cannot strand a VM with a token nobody
knows. A replaced or rotated VM's token goes with it, and every new VM gets a fresh one.
Token values never reach a log line, an event or an error message.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Final

from controller.toolkit.upserts import decode_secret_data, upsert_secret
from wspin.core.kinds import SECRETS
from wspin.kube.client import Kube

TOKENS_SECRET: Final = "relay-vm-tokens"  # noqa: S105 (a Secret name)
TOKEN_BYTES: Final = 32


def generate_token() -> str:
    """32 random bytes as 64 lowercase hex characters."""
    return secrets.token_hex(TOKEN_BYTES)


async def read_tokens(kube: Kube, namespace: str) -> dict[str, str]:
    """token key → token; empty when the Secret does not exist; empty values are skipped."""
    return decode_secret_data(await kube.get_or_none(SECRETS, TOKENS_SECRET, namespace))


async def write_tokens(kube: Kube, namespace: str, tokens: Mapping[str, str]) -> None:
    """Make the Secret hold exactly ``tokens`` (created when missing)."""
    await upsert_secret(kube, namespace, TOKENS_SECRET, tokens)
