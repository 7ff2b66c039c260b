"""Which provider credentials are staged, and the digests that say when to re-seal. Pure.

A kind is stageable iff it has a row in ``KIND_UPSTREAMS`` (the router can front it with a
bearer key); the API's batch builder uses the same predicate, so the staged set and the
set it rewrites cannot drift. Skipped providers keep the raw-key path and are listed in the
CredentialsStaged message.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

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
        desired.append(DesiredProvider(credential, upstream))
    return desired, skipped
