"""The handoff revision: one short, deterministic name for everything a pod must apply.

``r`` + the first 12 hex of SHA-256 over the router URL, ``;``, and the sorted,
``;``-joined entries ``slug|keyID|expiresAt|baseURL|<keyDigest>/<modelsDigest>`` (the digest
part empty for a slug without bookkeeping). Any new envelope or token changes it, so the
API's batch hash changes and agentd applies the renewal. Pure.
"""

from __future__ import annotations

import hashlib

from controller.staging.bookkeeping import Bookkeeping
from controller.staging.tokens import HandoffEntry


def revision(router_url: str, entries: list[HandoffEntry], bookkeeping: Bookkeeping) -> str:
    parts = []
    for entry in entries:
        slug = entry["providerSlug"]
        staged = bookkeeping.get(slug)
        digests = f"{staged.key_digest}/{staged.models_digest}" if staged else ""
        parts.append(f"{slug}|{entry['keyID']}|{entry['expiresAt']}|{entry['baseURL']}|{digests}")
    text = router_url + ";" + ";".join(sorted(parts))
    return "r" + hashlib.sha256(text.encode()).hexdigest()[:12]
