"""The handoff: the scoped tokens a workspace gets instead of its keys, and the revision that
names them.

The handoff Secret ``workspace-relay-<ws>`` (key ``handoff``) in the workspace's namespace is
the only token store: the API's batch builder reads it and hands the pod each provider's token
and router path. Owned by the Workspace (garbage-collected with it) and written only when its
bytes change, so a steady-state pass costs one GET here.

Tokens are reused until half the TTL, minted otherwise, and a still-valid token is kept when a
mint fails (throwing away a token that still works would stop inference for nothing); a token
whose scope no longer matches (another keyID, upstream or model list) is never reused.

Only what the controller itself wrote is reused. The Secret's name is predictable, and in a
namespace several users share, one of them could put a handoff there first, or edit it, with a
token and router path of its own that the Workspace's pod would then be handed. So entries
are read only from a handoff labelled ``llmsafespaces.dev/workspace-uid`` with the Workspace's
uid (a label, and data, the chart's ownership policies let only the controller write) and
owned by it, for the router the controller talks to now; and an entry is reused only when
every field is what the controller would write for it: slug, kind, router path, upstream,
model list, key and a token (``_same_scope``). A handoff that is not the controller's is
overwritten with freshly minted tokens.

The revision is ``r`` + the first 12 hex of SHA-256 over the router URL, ``;``, and the sorted,
``;``-joined entries ``slug|keyID|expiresAt|baseURL|<keyDigest>/<modelsDigest>`` (the digest
part empty for a slug without bookkeeping). Any new envelope or token changes it, so the API's
batch hash changes and agentd applies the renewal.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, TypedDict

from controller.staging.clients import InternalCallError, MintRequest
from controller.staging.desired import Bookkeeping, DesiredProvider
from controller.staging.ownership import owner_labels
from controller.staging.secrets import secret_value
from controller.types import Obj
from wspin.core.clock import format_time, parse_time
from wspin.core.contract import LABEL_WORKSPACE_UID
from wspin.core.kinds import SECRETS, WORKSPACES
from wspin.core.logs import fields
from wspin.kube.client import Kube

log = logging.getLogger("controller.staging")

HANDOFF_KEY: Final = "handoff"
MAX_TOKEN: Final = 4096
"""Bytes: a router token is far shorter; a longer value is not one the router minted."""


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


def parse_entries(raw: bytes | None, router_url: str) -> dict[str, HandoffEntry]:
    """The existing handoff's entries by slug, when it was written for ``router_url``; anything
    unreadable counts as no entry."""
    if not raw:
        return {}
    try:
        decoded: Any = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(decoded, dict) or decoded.get("routerURL") != router_url:
        return {}
    providers = decoded.get("providers")
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
    *,
    workspace: str,
) -> bool:
    """The cached token still fits: same keyID and scope, and not past half its lifetime."""
    if not _same_scope(entry, want, key_id, workspace):
        return False
    expires = parse_time(entry.get("expiresAt"))
    return expires is not None and now <= expires - timedelta(seconds=ttl / 2)


def still_valid(
    entry: HandoffEntry, want: DesiredProvider, key_id: str, now: datetime, *, workspace: str
) -> bool:
    """Worth keeping through a mint failure: same keyID and scope, not yet expired.

    The whole scope must match, not only the keyID: a token scoped to a former upstream or model
    list would send the key where its owner no longer wants it, which is worse than a missing
    token."""
    if not _same_scope(entry, want, key_id, workspace):
        return False
    expires = parse_time(entry.get("expiresAt"))
    return expires is not None and now < expires


_ENTRY_FIELDS: Final = frozenset(HandoffEntry.__required_keys__)


def _same_scope(entry: HandoffEntry, want: DesiredProvider, key_id: str, workspace: str) -> bool:
    """Every field is what the controller writes for ``want``: nothing more, nothing else."""
    token = entry.get("token")
    return (
        set(entry) == _ENTRY_FIELDS
        and isinstance(token, str)
        and 0 < len(token) <= MAX_TOKEN
        and entry.get("providerSlug") == want.slug
        and entry.get("kind") == want.kind
        and entry.get("routerPath") == router_path(workspace, want.slug)
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
        if entry is not None and reusable(entry, want, key_id, now, ttl, workspace=workspace):
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
            if entry is not None and still_valid(entry, want, key_id, now, workspace=workspace):
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
                expiresAt=format_time(now + timedelta(seconds=int(ttl))),
            )
        )
    return result


def revision(router_url: str, entries: list[HandoffEntry], bookkeeping: Bookkeeping) -> str:
    parts = []
    for entry in entries:
        slug = entry["providerSlug"]
        staged = bookkeeping.get(slug)
        digests = f"{staged.key_digest}/{staged.models_digest}" if staged else ""
        parts.append(f"{slug}|{entry['keyID']}|{entry['expiresAt']}|{entry['baseURL']}|{digests}")
    text = router_url + ";" + ";".join(sorted(parts))
    return "r" + hashlib.sha256(text.encode()).hexdigest()[:12]


LABEL_WORKSPACE: Final = "llmsafespaces.dev/workspace"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"


def written_by_controller(secret: Obj, ws: Obj) -> bool:
    """The Secret carries the controller-only uid label of ``ws`` and is owned by it."""
    uid = (ws.get("metadata") or {}).get("uid")
    meta = secret.get("metadata") or {}
    owned = any(
        isinstance(ref, dict) and ref.get("controller") is True and ref.get("uid") == uid
        for ref in meta.get("ownerReferences") or ()
    )
    return bool(uid) and owned and (meta.get("labels") or {}).get(LABEL_WORKSPACE_UID) == uid


@dataclass(frozen=True)
class Existing:
    """The handoff as read at the start of token renewal."""

    secret: Obj | None = None
    raw: bytes | None = None
    entries: dict[str, HandoffEntry] = field(default_factory=dict)


class HandoffWriter:
    def __init__(self, kube: Kube, router_url: str) -> None:
        self.kube = kube
        self.router_url = router_url
        """The router the entries' tokens must have been minted by."""

    async def read(self, ws: Obj) -> Existing:
        """The handoff at the Workspace's name; its entries only when the controller wrote
        them for this Workspace and router (see the module docstring)."""
        meta = ws["metadata"]
        secret = await self.kube.get_or_none(
            SECRETS, handoff_name(meta["name"]), meta.get("namespace")
        )
        if secret is None:
            return Existing()
        raw = secret_value(secret, HANDOFF_KEY)
        if not written_by_controller(secret, ws):
            return Existing(secret, raw)
        return Existing(secret, raw, parse_entries(raw, self.router_url))

    async def write(
        self,
        ws: Obj,
        existing: Existing,
        revision: str,
        router_url: str,
        entries: list[HandoffEntry],
    ) -> None:
        """Create, update (with the read resourceVersion) or leave alone.

        The Secret carries the owning Workspace's namespace and uid (labels) and a controller
        owner reference to it; an update puts both right, so a handoff left behind by an
        earlier Workspace of the same name is adopted instead of garbage-collected with it."""
        body = render(Handoff(revision=revision, routerURL=router_url, providers=entries))
        meta = ws["metadata"]
        labels = {
            LABEL_WORKSPACE: meta["name"],
            LABEL_MANAGED_BY: "wspin-controller",
            **owner_labels(ws),
        }
        owners = [
            {
                "apiVersion": WORKSPACES.api_version,
                "kind": WORKSPACES.kind,
                "name": meta["name"],
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        data = {HANDOFF_KEY: base64.b64encode(body).decode()}
        if existing.secret is not None:
            current = existing.secret.get("metadata") or {}
            if (
                existing.raw == body
                and current.get("ownerReferences") == owners
                and labels.items() <= (current.get("labels") or {}).items()
            ):
                return
            updated = dict(existing.secret)
            updated["metadata"] = {
                **current,
                "labels": {**(current.get("labels") or {}), **labels},
                "ownerReferences": owners,
            }
            updated["data"] = data
            updated.pop("stringData", None)
            await self.kube.replace(SECRETS, updated)
            return
        secret = {
            "metadata": {
                "name": handoff_name(meta["name"]),
                "namespace": meta.get("namespace"),
                "labels": labels,
                "ownerReferences": owners,
            },
            "type": "Opaque",
            "data": data,
        }
        await self.kube.create(SECRETS, secret, meta.get("namespace"))
