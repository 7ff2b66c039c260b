"""The desired set: which provider credentials are staged, and what was staged before.

A kind is stageable iff it has a row in ``KIND_UPSTREAMS`` (the router can front it with a
bearer key); the API's batch builder uses the same predicate, so the staged set and the set it
rewrites cannot drift. Skipped providers keep the raw-key path and are listed in the
CredentialsStaged message. A stageable provider without a model list is refused, not staged:
the router reads an empty allowlist as every model, so no token is minted for it and the
Workspace reports ``CredentialsStaged=False`` naming it.

What was staged is kept in the Workspace's status, under ``relayStaging``, because only the
controller writes status (the status subresource; a tenant's role grants the Workspace, not
its status) and envelopes are written blind and never read back (the relay namespace grants no
get on them):

- ``sealedGeneration``: the public-key generation last sealed under;
- ``stagedRevision``: the revision of the handoff the pass last wrote;
- ``providers``: slug → ``{keyDigest, keyID, modelsDigest, redactionID}``;
- ``stagedFor``: ``<namespace>/<uid>`` of the Workspace they describe.

The bookkeeping decides what is re-sealed and which redaction groups leave the redactor; it
never names what is deleted. Revocation deletes by label, ``llmsafespaces.dev/workspace-uid``
and the slug together (``envelopes.revoke``), so whatever a record said, only this
Workspace's own envelopes can go.

Releases before this one kept the same record in four ``llmsafespaces.dev/relay-*``
annotations on the Workspace, which its tenant can write. They are never read for what they
say: their presence only marks a Workspace staged by such a release, whose first pass sweeps
its own envelopes that are no longer bound (``LEGACY_ANNOTATIONS``) and then removes them.

Absent or unparseable bookkeeping reads as empty: everything is re-sealed, the safe direction.
Comparing the two (``needs_seal``) is the plan of a pass. Pure, but for
``write_bookkeeping``, which records the result in the Workspace's status.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

from controller.staging.ownership import STAGED_FOR_ANNOTATION, STAGED_STATUS_FIELD, staged_for
from controller.types import Obj
from wspin.core.errors import NotFound
from wspin.core.kinds import WORKSPACES
from wspin.core.workspace import WorkspaceStatus
from wspin.kube.client import Kube

KIND_UPSTREAMS: Final[dict[str, str]] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1",
    "google": "https://generativelanguage.googleapis.com/v1",
    "cohere": "https://api.cohere.com/v1",
    "mistral": "https://api.mistral.ai/v1",
    "perplexity": "https://api.perplexity.ai",
    "groq": "https://api.groq.com/openai/v1",
    "xai": "https://api.x.ai/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "together": "https://api.together.xyz/v1",
    "openai_compatible": "",
}
"""Kind → default upstream; "" = stageable only with an explicit base URL."""

NO_MODELS: Final = "no model list"

# A slug becomes part of a Secret name and a label value: lowercase DNS-label characters.
_SLUG = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class ProviderCredential:
    """One bound provider as the credential source returns it. The key stays out of repr."""

    kind: str
    slug: str
    api_key: str = field(repr=False)
    base_url: str = ""
    models: tuple[str, ...] = ()


@dataclass(frozen=True)
class DesiredProvider:
    """A provider to stage: where its traffic goes and what it may ask for."""

    credential: ProviderCredential
    upstream: str

    @property
    def slug(self) -> str:
        return self.credential.slug

    @property
    def kind(self) -> str:
        return self.credential.kind

    @property
    def models(self) -> list[str]:
        return list(self.credential.models)

    @property
    def key_digest(self) -> str:
        return short_digest(self.credential.api_key.encode())

    @property
    def models_digest(self) -> str:
        return short_digest(go_json(self.models).encode())


@dataclass(frozen=True)
class Skipped:
    slug: str
    kind: str
    why: str
    refused: bool = False
    """Relay-frontable, but a token for it would be wider than its owner asked (no model
    list): never sealed or minted, and reported as ``CredentialsStaged=False``."""

    def describe(self) -> str:
        return f'"{self.slug}" ({self.kind}: {self.why})'


def short_digest(data: bytes) -> str:
    """First 12 hex characters of SHA-256: irreversible, safe for annotations and logs."""
    return hashlib.sha256(data).hexdigest()[:12]


def go_json(value: Any) -> str:
    """Compact JSON as Go's ``encoding/json`` writes it (``<``, ``>``, ``&`` escaped), so
    digests match annotations a Go controller wrote and a switch does not re-seal."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def desired_set(
    credentials: list[ProviderCredential],
) -> tuple[list[DesiredProvider], list[Skipped]]:
    """The providers to stage (source order, first binding of a slug wins) and the rest."""
    desired: list[DesiredProvider] = []
    skipped: list[Skipped] = []
    seen: set[str] = set()
    for credential in credentials:
        if credential.slug in seen:
            continue
        seen.add(credential.slug)
        if credential.kind not in KIND_UPSTREAMS:
            skipped.append(Skipped(credential.slug, credential.kind, "not relay-frontable"))
            continue
        upstream = credential.base_url or KIND_UPSTREAMS[credential.kind]
        if not upstream:
            skipped.append(
                Skipped(credential.slug, credential.kind, "no baseURL and no kind default")
            )
            continue
        if not _SLUG.match(credential.slug):
            skipped.append(
                Skipped(credential.slug, credential.kind, "slug is not a lowercase DNS label")
            )
            continue
        if not credential.models:
            # The router reads an empty allowlist as "any model": a token minted from it
            # would let the workspace call every model the key can reach.
            skipped.append(Skipped(credential.slug, credential.kind, NO_MODELS, refused=True))
            continue
        desired.append(DesiredProvider(credential, upstream))
    return desired, skipped


STATUS_FIELD: Final = STAGED_STATUS_FIELD
"""The status field holding the bookkeeping (``status.relayStaging``)."""
SEALED_GENERATION: Final = "sealedGeneration"
STAGED_REVISION: Final = "stagedRevision"
STAGED_PROVIDERS: Final = "providers"
STAGED_FOR: Final = "stagedFor"
"""``<namespace>/<uid>`` of the Workspace the other three describe. A status restored by a
backup tool into another namespace or onto a re-created Workspace is not this Workspace's:
bookkeeping that is not its own reads as nothing staged, so everything is sealed afresh."""
FIELDS: Final = (SEALED_GENERATION, STAGED_REVISION, STAGED_PROVIDERS, STAGED_FOR)

ANNOTATION_PREFIX: Final = "llmsafespaces.dev/"
LEGACY_ANNOTATIONS: Final = tuple(
    ANNOTATION_PREFIX + name
    for name in (
        "relay-sealed-generation",
        "relay-staged-revision",
        "relay-staged-providers",
        STAGED_FOR_ANNOTATION.removeprefix(ANNOTATION_PREFIX),
    )
)
"""Where releases before this one kept the bookkeeping (on the tenant's own object): their
content is never trusted, their presence asks for one sweep of this Workspace's unbound
envelopes, and the pass removes them."""


@dataclass(frozen=True)
class Staged:
    """What was sealed for one slug: digests of the inputs, the key it was sealed under and
    the redaction group of its plaintext."""

    key_digest: str
    key_id: str
    models_digest: str
    redaction_id: str


Bookkeeping = dict[str, Staged]


def recorded(ws: Obj) -> dict[str, str]:
    """The bookkeeping as the status holds it now (missing fields left out), each as text."""
    found = WorkspaceStatus.of(ws.get("status")).relay_staging
    if not isinstance(found, dict):
        return {}
    result: dict[str, str] = {}
    for name in FIELDS:
        value = found.get(name)
        if isinstance(value, dict):
            result[name] = go_json(value)
        elif isinstance(value, str | int) and not isinstance(value, bool):
            result[name] = str(value)
    return result


def has_legacy_annotations(ws: Obj) -> bool:
    """Whether a release before this one kept bookkeeping on this Workspace's annotations."""
    current = (ws.get("metadata") or {}).get("annotations") or {}
    return any(name in current for name in LEGACY_ANNOTATIONS)


def parse_providers(raw: str | None) -> Bookkeeping:
    if not raw:
        return {}
    try:
        decoded = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(decoded, dict):
        return {}
    result: Bookkeeping = {}
    for slug, entry in decoded.items():
        if not isinstance(entry, dict) or not _SLUG.match(str(slug)):
            continue
        values = [entry.get(k) for k in ("keyDigest", "keyID", "modelsDigest", "redactionID")]
        if all(isinstance(v, str) for v in values):
            result[str(slug)] = Staged(*(str(v) for v in values))
    return result


def render_providers(bookkeeping: Bookkeeping) -> str:
    return go_json(
        {
            slug: {
                "keyDigest": s.key_digest,
                "keyID": s.key_id,
                "modelsDigest": s.models_digest,
                "redactionID": s.redaction_id,
            }
            for slug, s in bookkeeping.items()
        }
    )


def sealed_generation(annotations: dict[str, str]) -> int:
    """The generation last sealed under; 0 when absent or garbled (forces a re-seal)."""
    try:
        return max(0, int(annotations.get(SEALED_GENERATION, "0")))
    except ValueError:
        return 0


def needs_seal(staged: Staged | None, want: DesiredProvider, key_id: str, *, force: bool) -> bool:
    """Re-seal when never sealed, forced (new generation), or the keyID, the models or the key
    value (a credential rotated under a stable slug) differ from what was sealed."""
    return (
        staged is None
        or force
        or staged.key_id != key_id
        or staged.models_digest != want.models_digest
        or staged.key_digest != want.key_digest
    )


def with_owner_mark(ws: Obj, wanted: dict[str, str], *, mine: bool) -> dict[str, str]:
    """``wanted`` plus the owner mark: this Workspace's when the bookkeeping describes it,
    else the mark as it was (absent stays absent)."""
    if mine:
        return {**wanted, STAGED_FOR: staged_for(ws)}
    current = recorded(ws)
    return {**wanted, STAGED_FOR: current[STAGED_FOR]} if STAGED_FOR in current else dict(wanted)


def _status_value(wanted: dict[str, str]) -> Obj | None:
    """The ``status.relayStaging`` object for ``wanted`` (None: no bookkeeping at all)."""
    if not wanted:
        return None
    value: Obj = {}
    for name in FIELDS:
        if name not in wanted:
            continue
        if name == STAGED_PROVIDERS:
            providers = json.loads(render_providers(parse_providers(wanted[name])))
            value[name] = providers
        else:
            value[name] = wanted[name]
    return value


async def write_bookkeeping(kube: Kube, ws: Obj, wanted: dict[str, str]) -> None:
    """Set the bookkeeping to exactly ``wanted``; no write when it is. The one place this
    module writes: everything above decides, this records (in status, through the status
    subresource; an earlier release's annotations are removed once it is recorded)."""
    meta = ws["metadata"]
    try:
        if recorded(ws) != wanted:
            old = WorkspaceStatus.of(ws.get("status")).relay_staging
            patch = {"status": {STATUS_FIELD: _replacing(old, _status_value(wanted))}}
            await kube.patch(WORKSPACES, meta["name"], patch, meta.get("namespace"), sub="status")
        if has_legacy_annotations(ws):
            legacy = {"metadata": {"annotations": dict.fromkeys(LEGACY_ANNOTATIONS)}}
            await kube.patch(WORKSPACES, meta["name"], legacy, meta.get("namespace"))
    except NotFound:
        return  # deleted meanwhile; cleanup runs on termination


def _replacing(old: Any, new: Any) -> Any:
    """A merge patch that turns ``old`` into exactly ``new``: keys ``new`` lacks become null at
    every depth (a plain merge patch would keep a provider that is gone)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch = {key: _replacing(old.get(key), value) for key, value in new.items()}
    patch.update({key: None for key in old if key not in new})
    return patch
