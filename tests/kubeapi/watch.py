"""Watch streams: newline-delimited JSON events over one chunked HTTP response.

Behaviour follows kube-apiserver's watch cache:
- no resourceVersion (or "0"): synthetic ADDED events for what exists, then live changes;
- a resourceVersion: every change after it, or one ERROR event carrying a 410 ``Expired``
  Status (HTTP 200) once that history is compacted;
- selectors are applied to both sides of a change, so an object entering the selection is
  ADDED and one leaving it is DELETED, carrying the object as it was before the change (at
  the change's resourceVersion);
- BOOKMARKs only when ``allowWatchBookmarks`` is set: periodically, on request of the test,
  and just before ``timeoutSeconds`` ends the stream.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable

from aiohttp import web

from tests.kubeapi.kinds import Kind
from tests.kubeapi.status import ApiError, bad_request
from tests.kubeapi.store import Change, Signal, Store
from wspin.core.objects import Obj

#: Without timeoutSeconds kube-apiserver picks 30 to 60 minutes; the middle is close enough.
DEFAULT_TIMEOUT = 45 * 60.0


def is_true(value: str | None) -> bool:
    """Go's ``strconv.ParseBool`` truthy spellings (the client sends ``True``)."""
    return value in {"1", "t", "T", "true", "TRUE", "True"}


def translate(change: Change, kind: Kind, matches: Callable[[Obj], bool]) -> Obj | None:
    """The event one watcher sees for a change, or None when it is outside its selection."""
    if (change.kind.group, change.kind.plural) != (kind.group, kind.plural):
        return None
    if change.type == "ADDED":
        return {"type": "ADDED", "object": change.obj} if matches(change.obj) else None
    if change.type == "DELETED":
        seen = matches(change.old if change.old is not None else change.obj)
        return {"type": "DELETED", "object": change.obj} if seen else None
    now, before = matches(change.obj), change.old is not None and matches(change.old)
    if now:
        return {"type": "MODIFIED" if before else "ADDED", "object": change.obj}
    if change.old is None or not before:
        return None
    # Leaving the selection: the object as the watcher last saw it (it no longer matches as
    # it is now), at the change's resourceVersion.
    left = copy.deepcopy(change.old)
    left["metadata"]["resourceVersion"] = str(change.rv)
    return {"type": "DELETED", "object": left}


async def serve_watch(
    request: web.Request,
    store: Store,
    kind: Kind,
    matches: Callable[[Obj], bool],
    *,
    bookmark_interval: float,
) -> web.StreamResponse:
    """Stream one watch until its timeout, a test's signal, or the client going away."""
    query = request.query
    raw_rv = query.get("resourceVersion") or ""
    bookmarks = is_true(query.get("allowWatchBookmarks"))
    try:
        since = None if raw_rv in ("", "0") else int(raw_rv)
        timeout = float(query.get("timeoutSeconds") or DEFAULT_TIMEOUT)
    except ValueError as err:
        raise bad_request(f"invalid resourceVersion or timeoutSeconds: {err}") from err

    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)

    async def send(event: Obj) -> None:
        await response.write(json.dumps(event, separators=(",", ":")).encode() + b"\n")

    def bookmark(rv: int) -> Obj:
        meta = {"resourceVersion": str(rv)}
        return {"type": "BOOKMARK", "object": {**_type_of(kind), "metadata": meta}}

    try:
        backlog, queue = store.open_watch(since)
    except ApiError as err:
        await send({"type": "ERROR", "object": err.status()})
        await response.write_eof()
        return response
    aborted = False
    try:
        if since is None:
            for obj in store.select(kind, "", matches):
                await send({"type": "ADDED", "object": obj})
        progress = store.resource_version if since is None else since
        for change in backlog:
            progress = change.rv
            if (event := translate(change, kind, matches)) is not None:
                await send(event)
        deadline = asyncio.get_running_loop().time() + timeout
        while (left := deadline - asyncio.get_running_loop().time()) > 0:
            wait = min(left, bookmark_interval) if bookmarks else left
            try:
                item = await asyncio.wait_for(queue.get(), wait)
            except TimeoutError:
                if bookmarks:
                    await send(bookmark(progress))
                continue
            if item is Signal.BOOKMARK:
                if bookmarks:
                    await send(bookmark(progress))
            elif item is Signal.CLOSE:
                break
            elif item is Signal.ABORT:
                aborted = True
                if request.transport is not None:
                    request.transport.abort()
                break
            elif isinstance(item, Change):
                progress = item.rv
                if (event := translate(item, kind, matches)) is not None:
                    await send(event)
    except ConnectionError:
        aborted = True
    finally:
        store.close_watch(queue)
    if not aborted:
        await response.write_eof()
    return response


def _type_of(kind: Kind) -> Obj:
    return {"kind": kind.kind, "apiVersion": kind.api_version}
