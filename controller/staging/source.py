"""The credential source: the API's internal endpoint that returns a workspace's bound LLM
provider credentials in plaintext.

``GET <api>/api/v1/internal/workspaces/<ws>/llm-providers?ownerUserID=<id>`` with the
``X-Internal-Token`` header; 5 s timeout, one shot (the next reconcile is the retry), no
redirects, reads capped at 4 MiB. Successes are cached per (owner, workspace) for 60 s so a
workspace reconciled every 15 s costs the API one call a minute. Failures are never cached
and a stale answer is never served: a stale set could re-seal a key its owner just revoked.

The internal token and the keys never reach a log line or an error message.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any, Final

import aiohttp

from controller.staging.arming import RelayStagingConfig
from controller.staging.desired import ProviderCredential
from controller.staging.internal_http import (
    InternalCallError,
    PooledSession,
    read_capped,
    redirect_error,
)

CACHE_TTL: Final = 60.0
TIMEOUT: Final = 5.0
MAX_BODY: Final = 4 * 1024 * 1024

CacheKey = tuple[str, str]


class CredentialSource:
    """Fetches and caches provider credentials; shared by every pass in the process."""

    def __init__(
        self,
        config: RelayStagingConfig,
        *,
        ttl: float = CACHE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.ttl = ttl
        self.clock = clock
        self._cache: dict[CacheKey, tuple[float, list[ProviderCredential]]] = {}
        self._locks: dict[CacheKey, asyncio.Lock] = {}
        self.session = PooledSession(TIMEOUT)

    async def providers(self, workspace: str, owner_user_id: str) -> list[ProviderCredential]:
        """The workspace's providers, or ``InternalCallError`` saying what failed."""
        if not owner_user_id:
            raise InternalCallError("the Workspace has no spec.owner.userID to look up")
        key = (owner_user_id, workspace)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # one fetch per key at a time; the others wait and hit the cache
            now = self.clock()
            cached = self._cache.get(key)
            if cached is not None and cached[0] > now:
                return cached[1]
            self._cache.pop(key, None)
            fetched = await self._fetch(workspace, owner_user_id)
            self._prune(now)
            self._cache[key] = (now + self.ttl, fetched)
            return fetched

    def forget(self, workspace: str, owner_user_id: str) -> None:
        """Drop one cached answer (a deleted workspace)."""
        self._cache.pop((owner_user_id, workspace), None)
        self._locks.pop((owner_user_id, workspace), None)

    def _prune(self, now: float) -> None:
        for key in [k for k, (expires, _) in self._cache.items() if expires <= now]:
            del self._cache[key]

    async def _fetch(self, workspace: str, owner_user_id: str) -> list[ProviderCredential]:
        url = self.config.providers_url(workspace, owner_user_id)
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
