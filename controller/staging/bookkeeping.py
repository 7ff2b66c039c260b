"""The staging bookkeeping kept on the Workspace: three annotations and nothing else.

Envelopes are written blind and never read back (the relay namespace grants no get on
them), so every diff decision comes from these annotations:

- ``relay-sealed-generation``: the public-key generation last sealed under;
- ``relay-staged-revision``: the revision of the handoff the pass last wrote;
- ``relay-staged-providers``: slug → ``{keyDigest, keyID, modelsDigest, redactionID}``.

Absent or unparseable bookkeeping reads as empty: everything is re-sealed, the safe
direction. Pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from controller.staging.desired import DesiredProvider, go_json

Obj = dict[str, Any]

ANNOTATION_PREFIX: Final = "llmsafespaces.dev/"
SEALED_GENERATION: Final = ANNOTATION_PREFIX + "relay-sealed-generation"
STAGED_REVISION: Final = ANNOTATION_PREFIX + "relay-staged-revision"
STAGED_PROVIDERS: Final = ANNOTATION_PREFIX + "relay-staged-providers"
ANNOTATIONS: Final = (SEALED_GENERATION, STAGED_REVISION, STAGED_PROVIDERS)


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
