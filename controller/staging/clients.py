"""The two internal HTTP services the staging pass calls, and how every internal call behaves.

- ``CredentialSource``: the API's internal endpoint that returns a workspace's bound LLM
  provider credentials in plaintext, ``GET <api>/api/v1/internal/workspaces/<ws>/llm-providers
  ?ownerUserID=<id>`` with the ``X-Internal-Token`` header; 5 s timeout, reads capped at 4 MiB.
  Successes are cached per (owner, workspace) for 60 s; failures are never cached and a stale
  answer is never served: a stale set could re-seal a key its owner just revoked.
- ``RouterClient``: the relay router's internal API, mint a token and rotate the keypair; both
  ``POST`` with JSON and ``Authorization: Bearer <mint key>`` (read fresh from its Secret on
  every pass), 10 s timeout, answers decoded from at most 1 MiB. A non-200 carries the status
  and at most 4 KiB of the router's reason body (the pass redacts staged keys from it).

Every call is one shot (the next reconcile is the retry) and never follows a redirect: an
internal endpoint 301-redirected to https on a plaintext port would otherwise turn into a
silent, lasting failure, so a 3xx is an error that says where it pointed. Neither the
internal token nor a key ever reaches a log line or an error message.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Final, TypedDict

import aiohttp

from controller.staging.arming import RelayStagingConfig
from controller.staging.desired import ProviderCredential
from controller.toolkit import bodies
from wspin.core.clock import Monotonic, monotonic
from wspin.core.errors import WspinError


class PooledSession:
    """One ``aiohttp.ClientSession`` for a client's calls, opened on first use so connections
    to the router and the API are reused across workspaces; ``close()`` at shutdown."""

    def __init__(self, timeout_seconds: float) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._session: aiohttp.ClientSession | None = None

    def get(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class InternalCallError(WspinError):
    """An internal HTTP call failed; the message names the status or the transport error and
    never carries a credential."""


async def read_capped(response: aiohttp.ClientResponse, limit: int, what: str) -> bytes:
    """The whole body, or ``InternalCallError`` as soon as it exceeds ``limit`` bytes."""
    try:
        return await bodies.read_capped(response, limit)
    except bodies.BodyTooLarge:
        raise InternalCallError(f"{what}: the answer exceeds {limit} bytes") from None


def trimmed(body: bytes, limit: int = 4096) -> str:
    """At most ``limit`` bytes of an error body, decoded leniently, for a message."""
    return body[:limit].decode(errors="replace").strip()


def redirect_error(what: str, response: aiohttp.ClientResponse) -> InternalCallError:
    location = response.headers.get("Location", "") or "?"
    return InternalCallError(
        f"{what}: redirected (HTTP {response.status} to {location}); internal calls do not "
        "follow redirects"
    )


CACHE_TTL: Final = 60.0
SOURCE_TIMEOUT: Final = 5.0
MAX_BODY: Final = 4 * 1024 * 1024

CacheKey = tuple[str, str, str, str]
"""(owner, workspace, uid, namespace)."""


class CredentialSource:
    """Fetches and caches provider credentials; shared by every pass in the process."""

    def __init__(
        self,
        config: RelayStagingConfig,
        *,
        ttl: float = CACHE_TTL,
        clock: Monotonic = monotonic,
    ) -> None:
        self.config = config
        self.ttl = ttl
        self.clock = clock
        self._cache: dict[CacheKey, tuple[float, list[ProviderCredential]]] = {}
        self._locks: dict[CacheKey, asyncio.Lock] = {}
        self.session = PooledSession(SOURCE_TIMEOUT)

    async def providers(
        self, workspace: str, owner_user_id: str, *, uid: str = "", namespace: str = ""
    ) -> list[ProviderCredential]:
        """The workspace's providers, or ``InternalCallError`` saying what failed.

        ``owner_user_id`` is the owner admission verified (never ``spec.owner`` as it
        stands); ``uid`` and ``namespace`` name the one Workspace asked for."""
        if not owner_user_id:
            raise InternalCallError("the Workspace's verified owner has no userID to look up")
        key = (owner_user_id, workspace, uid, namespace)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # one fetch per key at a time; the others wait and hit the cache
            now = self.clock()
            cached = self._cache.get(key)
            if cached is not None and cached[0] > now:
                return cached[1]
            self._cache.pop(key, None)
            fetched = await self._fetch(key)
            self._prune(now)
            self._cache[key] = (now + self.ttl, fetched)
            return fetched

    def expires_in(
        self, workspace: str, owner_user_id: str, *, uid: str = "", namespace: str = ""
    ) -> float | None:
        """Seconds until the cached answer for this workspace expires; None when none is."""
        cached = self._cache.get((owner_user_id, workspace, uid, namespace))
        return None if cached is None else max(0.0, cached[0] - self.clock())

    def forget(
        self, workspace: str, owner_user_id: str, *, uid: str = "", namespace: str = ""
    ) -> None:
        """Drop one cached answer (a deleted workspace)."""
        self._cache.pop((owner_user_id, workspace, uid, namespace), None)
        self._locks.pop((owner_user_id, workspace, uid, namespace), None)

    def _prune(self, now: float) -> None:
        for key in [k for k, (expires, _) in self._cache.items() if expires <= now]:
            del self._cache[key]

    async def _fetch(self, key: CacheKey) -> list[ProviderCredential]:
        owner_user_id, workspace, uid, namespace = key
        url = self.config.providers_url(workspace, owner_user_id, uid=uid, namespace=namespace)
        headers = {"X-Internal-Token": self.config.internal_token, "Accept": "application/json"}
        what = "credential source"
        try:
            async with self.session.get().get(
                url, headers=headers, allow_redirects=False
            ) as response:
                if 300 <= response.status <= 399:
                    raise redirect_error(what, response)
                if response.status != 200:
                    raise InternalCallError(f"api returned status {response.status}")
                body = await read_capped(response, MAX_BODY, what)
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise InternalCallError(f"call api: {err or type(err).__name__}") from None
        return parse_providers(body)


def parse_providers(body: bytes) -> list[ProviderCredential]:
    """``{"providers": [{kind, slug, apiKey, baseURL?, models?: [{id}]}]}`` → credentials.

    Error messages name the entry and the field, never a value (a value may be a key)."""
    try:
        decoded: Any = json.loads(body)
    except ValueError:
        raise InternalCallError("api answered something that is not JSON") from None
    providers = decoded.get("providers") if isinstance(decoded, dict) else None
    if not isinstance(providers, list):
        raise InternalCallError('api answer has no "providers" list')
    result: list[ProviderCredential] = []
    for index, entry in enumerate(providers):
        where = f"api answer providers[{index}]"
        if not isinstance(entry, dict):
            raise InternalCallError(f"{where} is not an object")
        kind, slug, api_key = (_text(entry, name, where) for name in ("kind", "slug", "apiKey"))
        base_url = entry.get("baseURL") or ""
        if not isinstance(base_url, str):
            raise InternalCallError(f"{where}.baseURL must be a string")
        listed = entry.get("models") or []
        if not isinstance(listed, list):
            raise InternalCallError(f"{where}.models must be a list")
        models: list[str] = []
        for position, model in enumerate(listed):
            model_id = model.get("id") if isinstance(model, dict) else None
            if not isinstance(model_id, str) or not model_id:
                raise InternalCallError(f"{where}.models[{position}].id must be a string")
            models.append(model_id)
        result.append(ProviderCredential(kind, slug, api_key, base_url, tuple(models)))
    return result


def _text(entry: dict[str, Any], name: str, where: str) -> str:
    value = entry.get(name)
    if not isinstance(value, str) or not value:
        raise InternalCallError(f"{where}.{name} must be a non-empty string")
    return value


ROUTER_TIMEOUT: Final = 10.0
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
        self.session = PooledSession(ROUTER_TIMEOUT)

    async def mint(self, request: MintRequest, mint_key: str) -> str:
        """A scoped token; ``InternalCallError`` on any failure. A request without a model
        allowlist is refused here, before the router reads it as "every model"."""
        if not request["modelAllowlist"]:
            raise InternalCallError(
                f"refusing to mint a token for provider {request['providerSlug']} with an "
                "empty model allowlist (the router would allow every model)"
            )
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
