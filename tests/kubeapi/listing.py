"""Lists in chunks: ``limit`` and ``continue`` with kube-apiserver's semantics.

- Without ``continue`` a list is served at the current resourceVersion; with ``limit`` it
  stops after that many matching items and answers a ``continue`` token naming the snapshot
  (the first page's resourceVersion) and the key to start after.
- Every later page is served from that same snapshot, so objects created, changed or deleted
  between pages do not show up: the pages join into one consistent list, and every page
  reports the first page's resourceVersion.
- A token whose snapshot was compacted away answers 410 ``Expired``, as etcd's compaction
  does on a real server; the client starts a new list. A token that does not decode is a
  400.
- ``remainingItemCount`` is set only for lists without selectors (with one the server does
  not know how many of the rest match).

Keys are ordered as etcd orders them: namespace, then name.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable

from tests.kubeapi.kinds import Kind
from tests.kubeapi.status import ApiError, bad_request
from tests.kubeapi.store import Store
from wspin.core.objects import Obj

_TOKEN_VERSION = "meta.k8s.io/v1"
_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)


def encode_token(rv: int, start: str) -> str:
    """The opaque token: unpadded URL-safe base64 of ``{"v", "rv", "start"}``."""
    raw = json.dumps({"v": _TOKEN_VERSION, "rv": rv, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_token(token: str) -> tuple[int, str]:
    """(snapshot resourceVersion, key to start at) or a 400 naming the problem."""
    try:
        padded = token + "=" * (-len(token) % 4)
        decoded = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if decoded.get("v") != _TOKEN_VERSION:
            raise ValueError(f"unsupported version {decoded.get('v')!r}")
        rv, start = int(decoded["rv"]), str(decoded["start"])
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise bad_request(f"continue key is not valid: {err}") from err
    if rv <= 0 or not start:
        raise bad_request("continue key is not valid: incorrect encoded start resourceVersion")
    return rv, start


def _key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def list_page(
    store: Store,
    kind: Kind,
    namespace: str,
    matches: Callable[[Obj], bool],
    *,
    limit: int,
    token: str | None,
    selected: bool,
) -> tuple[list[Obj], Obj]:
    """(items, list metadata) for one request; ``selected`` says a selector was given."""
    if token:
        rv, start = decode_token(token)
        if rv < store.compacted_rv:
            # The answer carries a token for the rest at the current version: inconsistent
            # with the pages already read, which is why a client should list again instead.
            rest = encode_token(store.resource_version, start)
            raise ApiError(410, _EXPIRED, "Expired", metadata={"continue": rest})
    else:
        rv, start = store.resource_version, ""
    objects = store.select_at(kind, namespace, rv)
    objects.sort(key=_key)
    remaining = [obj for obj in objects if _key(obj) >= start and matches(obj)]
    meta: Obj = {"resourceVersion": str(rv)}
    if limit <= 0 or len(remaining) <= limit:
        return copy.deepcopy(remaining), meta
    page = remaining[:limit]
    meta["continue"] = encode_token(rv, _key(page[-1]) + "\x00")
    if not selected:
        meta["remainingItemCount"] = len(remaining) - limit
    return copy.deepcopy(page), meta
