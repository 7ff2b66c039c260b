"""A bounded pool over a work queue, for work that is not a reconcile (the agent reads): one
task takes keys from the queue as slots free up and runs a handler for each, at most
``concurrency`` at once.

One taker, not ``concurrency`` workers each waiting on ``get()``: the queue wakes every waiter
on each add, and a pool that is mostly idle (reads of milliseconds, due a few hundred times a
second) would otherwise wake all of them for every key. The queue's guarantees hold as for
the reconcilers: a key is never handled twice at once, and one added while it is handled
comes back after.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Hashable
from functools import partial
from typing import Any, TypeVar

from controller.runtime.queue import ShutDown, WorkQueue
from wspin.core.logs import fields

log = logging.getLogger("controller.manager")

K = TypeVar("K", bound=Hashable)


async def serve(
    queue: WorkQueue[K],
    handle: Callable[[K], Coroutine[Any, Any, None]],
    *,
    concurrency: int,
    stop: asyncio.Event,
) -> None:
    """Run ``handle`` for each key ``queue`` hands out, at most ``concurrency`` at once, until
    ``stop`` is set; then the queue shuts down and handlers still running are cancelled. A
    handler's failure is logged; its key is done either way."""
    slots = asyncio.Semaphore(concurrency)
    running: set[asyncio.Task[None]] = set()

    def finished(key: K, task: asyncio.Task[None]) -> None:
        running.discard(task)
        queue.done(key)
        slots.release()
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "queued work failed",
                exc_info=task.exception(),
                extra=fields(queue=queue.name),
            )

    async def take() -> None:
        while True:
            await slots.acquire()
            try:
                key = await queue.get()
            except ShutDown:
                return
            task = asyncio.create_task(handle(key))
            running.add(task)
            task.add_done_callback(partial(finished, key))

    taker = asyncio.create_task(take())
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({taker, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        queue.shut_down()
        pending = [stopped, taker, *running]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
