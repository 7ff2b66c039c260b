"""Scoped tokens in the handoff Secret: reuse until half the TTL, mint otherwise, and keep a
still-valid token when a mint fails.

The handoff Secret (``workspace-relay-<ws>``, key ``handoff``) is the only token store: the
API's batch builder reads it and hands the pod token and router path instead of the key. So
a mint failure must not throw away a token that still works, and a token whose scope no
longer matches (another keyID, upstream or model list) is never reused.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypedDict

from controller.staging.desired import DesiredProvider
from controller.staging.internal_http import InternalCallError
from controller.staging.router import MintRequest
from wspin.logs import fields

log = logging.getLogger("controller.staging")

HANDOFF_KEY: Final = "handoff"


class HandoffEntry(TypedDict):
    providerSlug: str
    kind: str
    token: str
    routerPath: str
    baseURL: str
    modelAllowlist: list[str]
    keyID: str
    expiresAt: str


class Handoff(TypedDict):
    revision: str
    routerURL: str
    providers: list[HandoffEntry]


def handoff_name(workspace: str) -> str:
    return f"workspace-relay-{workspace}"


def router_path(workspace: str, slug: str) -> str:
    return f"/w/{workspace}/{slug}/v1"


def rfc3339(moment: datetime) -> str:
    """UTC, second precision, ``Z`` suffix."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def parse_entries(raw: bytes | None) -> dict[str, HandoffEntry]:
    """The existing handoff's entries by slug; anything unreadable counts as no entry."""
    if not raw:
        return {}
    try:
        decoded: Any = json.loads(raw)
    except ValueError:
        return {}
    providers = decoded.get("providers") if isinstance(decoded, dict) else None
    entries: dict[str, HandoffEntry] = {}
    for item in providers if isinstance(providers, list) else []:
        if isinstance(item, dict) and isinstance(item.get("providerSlug"), str):
            entries[item["providerSlug"]] = item  # type: ignore[assignment]
    return entries


def render(handoff: Handoff) -> bytes:
    """Compact JSON in a fixed key order, so an unchanged handoff is byte-identical."""
    return json.dumps(handoff, separators=(",", ":")).encode()


def reusable(
    entry: HandoffEntry,
    want: DesiredProvider,
    key_id: str,
    now: datetime,
    ttl: float,
) -> bool:
    """The cached token still fits: same keyID and scope, and not past half its lifetime."""
    if not _same_scope(entry, want, key_id):
        return False
    expires = parse_time(entry.get("expiresAt"))
    return expires is not None and now <= expires - timedelta(seconds=ttl / 2)


def still_valid(entry: HandoffEntry, want: DesiredProvider, key_id: str, now: datetime) -> bool:
    """Worth keeping through a mint failure: same keyID and scope, not yet expired.

    Stricter than the reference, which kept any unexpired token under the keyID: a token
    scoped to a former upstream or model list would send the key where its owner no longer
    wants it, which is worse than a missing token."""
    if not _same_scope(entry, want, key_id):
        return False
    expires = parse_time(entry.get("expiresAt"))
    return expires is not None and now < expires


def _same_scope(entry: HandoffEntry, want: DesiredProvider, key_id: str) -> bool:
    return (
        bool(entry.get("token"))
        and entry.get("keyID") == key_id
        and entry.get("baseURL") == want.upstream
        and entry.get("modelAllowlist") == want.models
    )


Mint = Callable[[MintRequest], Awaitable[str]]


@dataclass
class Tokens:
    """The handoff entries of one pass and how many providers ended up without a token."""

    entries: list[HandoffEntry] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    minted: int = 0


async def renew(
    workspace: str,
    desired: list[DesiredProvider],
    cached: dict[str, HandoffEntry],
    *,
    key_id: str,
    ttl: float,
    now: datetime,
    mint: Mint,
    redact: Callable[[str], str],
) -> Tokens:
    """One entry per desired provider: reused, freshly minted, or kept through a failure."""
    result = Tokens()
    for want in desired:
        entry = cached.get(want.slug)
        if entry is not None and reusable(entry, want, key_id, now, ttl):
            result.entries.append(entry)
            continue
        request = MintRequest(
            workspaceID=workspace,
            providerSlug=want.slug,
            baseURL=want.upstream,
            modelAllowlist=want.models,
            ttlSeconds=int(ttl),
            keyID=key_id,
        )
        try:
            token = await mint(request)
        except InternalCallError as err:
            log.warning(
                "token mint failed",
                extra=fields(workspace=workspace, provider=want.slug, error=redact(str(err))),
            )
            if entry is not None and still_valid(entry, want, key_id, now):
                result.entries.append(entry)
            else:
                result.failed.append(want.slug)
            continue
        result.minted += 1
        result.entries.append(
            HandoffEntry(
                providerSlug=want.slug,
                kind=want.kind,
                token=token,
                routerPath=router_path(workspace, want.slug),
                baseURL=want.upstream,
                modelAllowlist=want.models,
                keyID=key_id,
                expiresAt=rfc3339(now + timedelta(seconds=int(ttl))),
            )
        )
    return result
