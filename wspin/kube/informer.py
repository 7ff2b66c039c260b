"""An informer: a local cache of one kind's objects kept current by list-then-watch.

The cache holds the plain dicts the API server sent (no typed models to convert to and
from on every read), compacted on the way in by a ``compaction.Compactor`` of the
informer's own (managedFields dropped, strings interned, equal subtrees shared, every dict
and list read-only), so that 10,000 Workspaces and their pods fit the 250 MiB budget.
Readers never change a cached object: they change a copy.

Memory and latency at start: the list is requested in pages (``limit``/``continue``) and
each page is decoded and compacted into the cache before the next is asked for, yielding to
the event loop in between. A restart with 10,000 Workspaces therefore never holds a whole
decoded list next to the cache (about 2.5x the steady state when the three lists arrived at
once), and ``/healthz`` and the watches keep being served while it fills.

Consistency rules (client-go's reflector):
- List, remember the list's resourceVersion, then watch from it; every event and BOOKMARK moves
  the remembered version forward, so a watch that ends normally resumes where it stopped.
- 410 Gone (history compacted, or a list's continue token whose snapshot expired between
  pages) or a broken stream → re-list from the start. The re-list is diffed against the
  cache, and the differences are delivered as ADDED / MODIFIED / DELETED, so no change is lost
  while the watch was down, including deletions.
- Reconnects back off exponentially with jitter, bounded, and reset after a successful list.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable
from typing import Literal

from wspin.core.backoff import Backoff
from wspin.core.errors import Gone, KubeAPIError
from wspin.core.kinds import Resource
from wspin.core.logs import fields
from wspin.core.objects import Obj, ObjectKey
from wspin.kube.client import Kube
from wspin.kube.compaction import Compactor

log = logging.getLogger("wspin.informer")

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
Handler = Callable[[EventType, Obj, Obj | None], None]
"""``handler(event_type, obj, old_obj)``; ``old_obj`` is the cached version before the event
(None for ADDED). For DELETED, ``obj`` is the last state seen."""

Transform = Callable[[Obj], Obj]

_SHORT_WATCH = 1.0
"""Seconds; a watch ending sooner than this is followed by a backoff before resuming."""


LIST_PAGE_SIZE = 250
"""Items per list page: half client-go's default, because decoding a page holds the event
loop. 250 workspace pods are 0.6-1.5 MB of JSON, which orjson decodes in 5-15 ms on one
core; 10,000 objects take 40 requests."""

_COMPACT_BATCH = 50
"""Objects compacted between two yields to the event loop while a page is stored (about
8 ms of compaction for 50 workspace pods)."""


def keep_out_of_gc() -> None:
    """Move what is alive now out of the cyclic garbage collector's sight.

    Cached objects live long and form no reference cycles: reference counting frees them when
    they leave the cache, so the collector gains nothing by walking them, and a full
    collection over a growing cache of 10,000 pods held the event loop for up to 0.7 s (22
    of them, 7 s in all, while three such lists were stored). Frozen objects are still freed
    the moment their last reference goes; the young generations are collected first, so
    short-lived cycles are not frozen with them."""
    gc.collect(1)
    gc.freeze()


def labels_match(obj: Obj, labels: dict[str, str] | None) -> bool:
    """Equality match of every given label against the object's labels."""
    if not labels:
        return True
    have = obj.get("metadata", {}).get("labels") or {}
    return all(have.get(key) == value for key, value in labels.items())


class Informer:
    """List-then-watch cache of ``resource`` in ``namespace`` (None: all) matching ``labels``
    (a label selector string, passed to the API server).

    Implements ``controller.types.ObjectReader``: ``get``/``list`` read the cache and never
    touch the API. ``run()`` keeps it current until cancelled; ``wait_synced()`` returns once
    the first list has been applied.
    """

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        *,
        namespace: str | None = None,
        labels: str | None = None,
        transform: Transform | None = None,
        backoff_initial: float = 0.2,
        backoff_max: float = 30.0,
        watch_timeout: int = 300,
        page_size: int = LIST_PAGE_SIZE,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.namespace = namespace
        self.labels = labels
        self._transform: Transform = transform if transform is not None else Compactor()
        self._backoff = Backoff(backoff_initial, backoff_max, jitter=0.5)
        self._watch_timeout = watch_timeout
        self._page_size = page_size
        self._by_namespace: dict[str, dict[str, Obj]] = {}
        self._handlers: list[Handler] = []
        self._synced = asyncio.Event()
        self.resource_version = ""
        """The last resourceVersion applied (list, event or bookmark)."""
        self.relists = 0
        """How many times the cache was rebuilt by a list (the first list included)."""

    @property
    def name(self) -> str:
        scope = self.namespace or "*"
        return f"{self.resource.plural}[{scope}{',' + self.labels if self.labels else ''}]"

    # -- ObjectReader ------------------------------------------------------------------------

    def get(self, key: ObjectKey) -> Obj | None:
        return self._by_namespace.get(key.namespace, {}).get(key.name)

    def list(self, namespace: str | None = None, labels: dict[str, str] | None = None) -> list[Obj]:
        if namespace is not None:
            pools = [self._by_namespace.get(namespace, {})]
        else:
            pools = list(self._by_namespace.values())
        return [obj for pool in pools for obj in pool.values() if labels_match(obj, labels)]

    def __len__(self) -> int:
        return sum(len(pool) for pool in self._by_namespace.values())

    # -- events ------------------------------------------------------------------------------

    def add_handler(self, handler: Handler) -> None:
        """Receive every change. Added after sync, the handler first gets ADDED for each
        cached object, so it never misses the initial state."""
        self._handlers.append(handler)
        if self._synced.is_set():
            for obj in self.list():
                self._call(handler, "ADDED", obj, None)

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    # -- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        """List, watch, re-list on 410 or a broken stream; until cancelled."""
        loop = asyncio.get_running_loop()
        failures = 0  # in a row: the reconnect backoff's exponent
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    failures = 0
                started = loop.time()
                await self._watch()  # returns when the server ends the watch normally
                if loop.time() - started >= _SHORT_WATCH:
                    failures = 0
                    continue
                # A watch the server ends at once, again and again, must not become a hot
                # loop of requests: resume (from the same version) after the backoff.
            except Gone:
                log.info("watch expired (410), re-listing", extra=fields(informer=self.name))
                need_list = True
                continue  # a compacted history is no reason to wait
            except KubeAPIError as err:
                log.warning(
                    "watch or list failed, re-listing after backoff",
                    extra=fields(
                        informer=self.name, error=str(err), retry_in=self._retry_in(failures)
                    ),
                )
                need_list = True
            except Exception:  # a malformed response or a bug must not freeze the cache
                log.exception(
                    "informer failed unexpectedly, re-listing after backoff",
                    extra=fields(informer=self.name, retry_in=self._retry_in(failures)),
                )
                need_list = True
            failures += 1
            await asyncio.sleep(self._backoff.jittered(failures))

    def _retry_in(self, failures: int) -> float:
        """The longest wait before the next attempt after ``failures`` earlier ones, for logs."""
        return round(self._backoff.delay(failures + 1), 3)

    async def _list(self) -> None:
        fresh: dict[tuple[str, str], Obj] = {}
        version = ""
        pages = self.kube.list_pages(
            self.resource, self.namespace, labels=self.labels, limit=self._page_size
        )
        async for page in pages:
            items = page.pop("items", None) or []
            items.reverse()
            while items:  # popped as they go, so the page's raw dicts go with them
                item = items.pop()
                item.setdefault("apiVersion", self.resource.api_version)
                item.setdefault("kind", self.resource.kind)
                obj = self._transform(item)
                key = ObjectKey.of(obj)
                fresh[(key.namespace, key.name)] = obj
                if len(fresh) % _COMPACT_BATCH == 0:
                    await asyncio.sleep(0)
            version = str((page.get("metadata") or {}).get("resourceVersion", ""))
            keep_out_of_gc()
            await asyncio.sleep(0)  # the loop serves probes and watches between pages
        # Deliver the difference so a re-list after a gap loses no change.
        for namespace, pool in list(self._by_namespace.items()):
            for name, old in list(pool.items()):
                if (namespace, name) not in fresh:
                    self._remove(ObjectKey(namespace, name))
                    self._emit("DELETED", old, old)
        for (namespace, name), obj in fresh.items():
            previous = self.get(ObjectKey(namespace, name))
            self._store(obj)
            if previous is None:
                self._emit("ADDED", obj, None)
            elif _version(previous) != _version(obj):
                self._emit("MODIFIED", obj, previous)
        self.resource_version = version
        self.relists += 1
        if not self._synced.is_set():
            log.info("cache synced", extra=fields(informer=self.name, objects=len(self)))
            self._synced.set()

    async def _watch(self) -> None:
        async for event in self.kube.watch(
            self.resource,
            self.namespace,
            resource_version=self.resource_version or None,
            labels=self.labels,
            timeout_seconds=self._watch_timeout,
        ):
            kind = event.get("type")
            raw = event.get("object") or {}
            version = str(raw.get("metadata", {}).get("resourceVersion", ""))
            if kind == "BOOKMARK":
                self.resource_version = version or self.resource_version
                continue
            if kind not in ("ADDED", "MODIFIED", "DELETED"):
                log.warning("unknown watch event", extra=fields(informer=self.name, type=kind))
                continue
            obj = self._transform(raw)
            key = ObjectKey.of(obj)
            old = self.get(key)
            if kind == "DELETED":
                self._remove(key)
                self._emit("DELETED", obj, old)
            else:
                self._store(obj)
                self._emit("ADDED" if old is None else "MODIFIED", obj, old)
            self.resource_version = version or self.resource_version

    # -- the store ---------------------------------------------------------------------------

    def _store(self, obj: Obj) -> None:
        key = ObjectKey.of(obj)
        self._by_namespace.setdefault(key.namespace, {})[key.name] = obj

    def _remove(self, key: ObjectKey) -> None:
        pool = self._by_namespace.get(key.namespace)
        if pool is not None:
            pool.pop(key.name, None)
            if not pool:
                del self._by_namespace[key.namespace]

    def _emit(self, kind: EventType, obj: Obj, old: Obj | None) -> None:
        for handler in self._handlers:
            self._call(handler, kind, obj, old)

    def _call(self, handler: Handler, kind: EventType, obj: Obj, old: Obj | None) -> None:
        try:
            handler(kind, obj, old)
        except Exception:
            log.exception("informer event handler failed", extra=fields(informer=self.name))


def _version(obj: Obj) -> str:
    return str(obj.get("metadata", {}).get("resourceVersion", ""))
