"""The relay router's internal API, as the staging pass calls it: mint a token, rotate the
keypair.

Both are ``POST`` with JSON and ``Authorization: Bearer <mint key>``; the caller passes the
mint key read fresh from its Secret on every pass. 10 s timeout, no retries (the next
reconcile is the retry), no redirects, answers decoded from at most 1 MiB. A non-200 is an
error carrying the status and at most 4 KiB of the router's reason body (the pass redacts
staged keys from it before it goes anywhere).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Final, TypedDict

import aiohttp

from controller.staging.internal_http import (
    InternalCallError,
    PooledSession,
    read_capped,
    redirect_error,
    trimmed,
)

TIMEOUT: Final = 10.0
MAX_ANSWER: Final = 1024 * 1024
TOKENS_PATH: Final = "/internal/v1/tokens"
ROTATE_PATH: Final = "/internal/v1/keys/rotate"


class MintRequest(TypedDict):
    """The token scope the router signs (its wire names)."""

    workspaceID: str
    providerSlug: str
    baseURL: str
    modelAllowlist: list[str]
    ttlSeconds: int
    keyID: str


@dataclass(frozen=True)
class RotateReceipt:
    """What the router says it rotated to; checked against the published key before use."""

    key_id: str
    generation: int
    public_key: bytes


class RouterClient:
    """Calls the router's internal API at ``router_url``."""

    def __init__(self, router_url: str) -> None:
        self.router_url = router_url.rstrip("/")
        self.session = PooledSession(TIMEOUT)

    async def mint(self, request: MintRequest, mint_key: str) -> str:
        """A scoped token; ``InternalCallError`` on any failure."""
        answer = await self._post(TOKENS_PATH, dict(request), mint_key, "token mint")
        token = answer.get("token")
        if not isinstance(token, str) or not token:
            raise InternalCallError("router minted an empty token")
        return token

    async def rotate(self, mint_key: str) -> RotateReceipt:
        """Ask the router to rotate its keypair; the receipt must be complete."""
        answer = await self._post(ROTATE_PATH, {}, mint_key, "keypair rotate")
        key_id, generation = answer.get("keyID"), answer.get("generation")
        try:
            public_key = base64.b64decode(str(answer.get("publicKey") or ""), validate=True)
        except (binascii.Error, ValueError):
            public_key = b""
        if (
            not isinstance(key_id, str)
            or not key_id
            or not isinstance(generation, int)
            or generation < 1
            or not public_key
        ):
            raise InternalCallError(
                "router rotate receipt is incomplete (needs keyID, generation ≥ 1, publicKey)"
            )
        return RotateReceipt(key_id, generation, public_key)

    async def _post(self, path: str, body: dict[str, Any], mint_key: str, what: str) -> Any:
        if not mint_key:
            raise InternalCallError(f"{what}: the mint key is empty")
        headers = {"Authorization": f"Bearer {mint_key}", "Content-Type": "application/json"}
        url = self.router_url + path
        try:
            async with self.session.get().post(
                url, data=json.dumps(body), headers=headers, allow_redirects=False
            ) as response:
                if 300 <= response.status <= 399:
                    raise redirect_error(f"router {what}", response)
                raw = await read_capped(response, MAX_ANSWER, f"router {what}")
                if response.status != 200:
                    raise InternalCallError(
                        f"router returned status {response.status}: {trimmed(raw)}"
                    )
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise InternalCallError(
                f"router {what}: call failed: {err or type(err).__name__}"
            ) from None
        try:
            answer = json.loads(raw)
        except ValueError:
            raise InternalCallError(f"router {what}: the answer is not JSON") from None
        if not isinstance(answer, dict):
            raise InternalCallError(f"router {what}: the answer is not a JSON object")
        return answer
