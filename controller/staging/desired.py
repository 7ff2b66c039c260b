"""The desired set: which provider credentials are staged, and what was staged before.

A kind is stageable iff it has a row in ``KIND_UPSTREAMS`` (the router can front it with a
bearer key); the API's batch builder uses the same predicate, so the staged set and the set it
rewrites cannot drift. Skipped providers keep the raw-key path and are listed in the
CredentialsStaged message. A stageable provider without a model list is refused, not staged:
the router reads an empty allowlist as every model, so no token is minted for it and the
Workspace reports ``CredentialsStaged=False`` naming it.

What was staged is kept on the Workspace in three annotations and nothing else, because
envelopes are written blind and never read back (the relay namespace grants no get on them),
plus a fourth saying whose they are:

- ``relay-sealed-generation``: the public-key generation last sealed under;
- ``relay-staged-revision``: the revision of the handoff the pass last wrote;
- ``relay-staged-providers``: slug → ``{keyDigest, keyID, modelsDigest, redactionID}``;
- ``relay-staged-for``: ``<namespace>/<uid>`` of the Workspace they describe.

Absent or unparseable bookkeeping reads as empty: everything is re-sealed, the safe direction.
Comparing the two (``needs_seal``) is the plan of a pass. Pure, but for
``write_bookkeeping``, which records the result on the Workspace.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

from controller.staging.ownership import STAGED_FOR_ANNOTATION, staged_for
from controller.types import Obj
from wspin.core.errors import NotFound
from wspin.core.kinds import WORKSPACES
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


ANNOTATION_PREFIX: Final = "llmsafespaces.dev/"
SEALED_GENERATION: Final = ANNOTATION_PREFIX + "relay-sealed-generation"
STAGED_REVISION: Final = ANNOTATION_PREFIX + "relay-staged-revision"
STAGED_PROVIDERS: Final = ANNOTATION_PREFIX + "relay-staged-providers"
STAGED_FOR: Final = STAGED_FOR_ANNOTATION
"""``<namespace>/<uid>`` of the Workspace the other three describe. Annotations travel with
a copied manifest (``kubectl get -o yaml`` into another namespace); bookkeeping that is not
this Workspace's own reads as nothing staged, so everything is sealed afresh under its owner."""
ANNOTATIONS: Final = (SEALED_GENERATION, STAGED_REVISION, STAGED_PROVIDERS, STAGED_FOR)


@dataclass(frozen=True)
class Staged:
    """What was sealed for one slug: digests of the inputs, the key it was sealed under and
    the redaction group of its plaintext."""

    key_digest: str
    key_id: str
    models_digest: str
    redaction_id: str


Bookkeeping = dict[str, Staged]


def annotations_of(ws: Obj) -> dict[str, str]:
    """The three bookkeeping annotations as they are now (missing ones left out)."""
    current = (ws.get("metadata") or {}).get("annotations") or {}
    return {name: str(current[name]) for name in ANNOTATIONS if name in current}


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
        if not isinstance(entry, dict):
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
    current = annotations_of(ws)
    return {**wanted, STAGED_FOR: current[STAGED_FOR]} if STAGED_FOR in current else dict(wanted)


async def write_bookkeeping(kube: Kube, ws: Obj, wanted: dict[str, str]) -> None:
    """Set the bookkeeping annotations to exactly ``wanted``; no write when they are. The one
    write this module makes: everything above decides, this records."""
    if annotations_of(ws) == wanted:
        return
    meta = ws["metadata"]
    patch = {"metadata": {"annotations": {k: wanted.get(k) for k in ANNOTATIONS}}}
    try:
        await kube.patch(WORKSPACES, meta["name"], patch, meta.get("namespace"))
    except NotFound:
        return  # deleted meanwhile; cleanup runs on termination
