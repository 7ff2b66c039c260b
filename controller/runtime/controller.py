"""One controller inside the manager: its queue, the event-to-key mapping that fills it, and
the worker loop that turns each reconcile's outcome into a queue decision.

The outcome switch (controller-runtime's ``reconcileHandler``) lives in exactly one place,
``reconcile_one``:
- ``None`` → done, backoff forgotten;
- ``Requeue(after)`` → come back after that interval (a real interval, not the backoff);
- ``TransientError(delay=…)`` → come back after ``delay``; without a delay, after the
  per-key exponential backoff;
- ``TerminalError`` → logged and dropped until the next event;
- any other exception → the per-key exponential backoff.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from controller.runtime.metrics import (
    RESULT_ERROR,
    RESULT_REQUEUE_AFTER,
    RESULT_SUCCESS,
    RESULT_TERMINAL,
    RuntimeMetrics,
)
from controller.runtime.queue import ShutDown, WorkQueue
from controller.types import Obj, ObjectKey, Reconciler, Requeue
from wspin.core.errors import TerminalError, TransientError
from wspin.core.kinds import Resource
from wspin.core.logs import fields
from wspin.kube.informer import EventType, Informer

log = logging.getLogger("controller.manager")

Mapper = Callable[[Obj], Iterable[ObjectKey]]


@dataclass
class Controller:
    """A reconciler, the cache of its primary kind, and its current work queue."""

    reconciler: Reconciler
    primary: Informer
    queue: WorkQueue

    @property
    def name(self) -> str:
        return self.reconciler.name


def owner_keys(obj: Obj, owner: Resource) -> list[ObjectKey]:
    """Keys of ``obj``'s controller ownerReference when it points at an ``owner`` kind."""
    namespace = obj.get("metadata", {}).get("namespace", "") if owner.namespaced else ""
    keys = []
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if not ref.get("controller"):
            continue
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        if ref.get("kind") == owner.kind and group == owner.group:
            keys.append(ObjectKey(namespace or "", ref["name"]))
    return keys


def owner_mapper(owner: Resource) -> Mapper:
    """Map an owned object to its controller owner of kind ``owner``."""

    def keys(obj: Obj) -> list[ObjectKey]:
        return owner_keys(obj, owner)

    return keys


def mapping_handler(
    controller: Controller, mapper: Mapper
) -> Callable[[EventType, Obj, Obj | None], None]:
    """An informer handler that queues ``mapper``'s keys for the old and the new object."""

    def handle(_: EventType, obj: Obj, old: Obj | None) -> None:
        keys = set(mapper(obj))
        if old is not None:
            keys.update(mapper(old))  # an object that changed owner notifies both
        for key in keys:
            controller.queue.add(key)

    return handle


async def work(controller: Controller, queue: WorkQueue, metrics: RuntimeMetrics) -> None:
    """One worker: take a key, reconcile it, repeat until the queue shuts down."""
    while True:
        try:
            key = await queue.get()
        except ShutDown:
            return
        try:
            await reconcile_one(controller, queue, key, metrics)
        finally:
            queue.done(key)
        # A reconcile that finds nothing to do never suspends, and neither does get() on a
        # full queue: without this, a first pass over 10,000 up-to-date keys would hold the
        # event loop (probes, watches, the lease) for seconds.
        await asyncio.sleep(0)


async def reconcile_one(
    controller: Controller, queue: WorkQueue, key: ObjectKey, metrics: RuntimeMetrics
) -> None:
    """Run one reconcile and turn its outcome into the queue decision (the one place)."""
    name = controller.name
    resource = controller.primary.resource.kind
    started = time.perf_counter()
    status = "error"
    metrics.active_workers.labels(name).inc()
    try:
        result = await controller.reconciler.reconcile(key)
    except TerminalError as err:
        queue.forget(key)
        metrics.reconcile_total.labels(name, RESULT_TERMINAL).inc()
        metrics.reconcile_errors.labels(name).inc()
        metrics.reconciliation_errors.labels(resource, "terminal").inc()
        log.error(
            "reconcile failed permanently; not retrying",
            extra=fields(controller=name, key=str(key), error=str(err)),
        )
    except TransientError as err:
        _count_error(metrics, name)
        metrics.reconciliation_errors.labels(resource, "transient").inc()
        if err.delay is not None:
            queue.forget(key)
            queue.add_after(key, err.delay)
            retry_in = err.delay
        else:
            retry_in = queue.add_rate_limited(key)
            metrics.queue_retries.labels(name).inc()
        log.warning(
            "reconcile failed; will retry",
            extra=fields(controller=name, key=str(key), error=str(err), retry_in=retry_in),
        )
    except Exception as err:
        _count_error(metrics, name)
        metrics.reconciliation_errors.labels(resource, "unexpected").inc()
        retry_in = queue.add_rate_limited(key)
        metrics.queue_retries.labels(name).inc()
        log.warning(
            "reconcile failed; will retry",
            exc_info=not isinstance(err, OSError),
            extra=fields(controller=name, key=str(key), error=str(err), retry_in=retry_in),
        )
    else:
        status = "ok"
        queue.forget(key)
        if isinstance(result, Requeue):
            queue.add_after(key, result.after)
            metrics.reconcile_total.labels(name, RESULT_REQUEUE_AFTER).inc()
        else:
            metrics.reconcile_total.labels(name, RESULT_SUCCESS).inc()
    finally:
        metrics.active_workers.labels(name).dec()
        elapsed = time.perf_counter() - started
        metrics.reconcile_time.labels(name).observe(elapsed)
        metrics.reconciliation_duration.labels(resource, status).observe(elapsed)


def _count_error(metrics: RuntimeMetrics, name: str) -> None:
    metrics.reconcile_total.labels(name, RESULT_ERROR).inc()
    metrics.reconcile_errors.labels(name).inc()
