"""The bounded pool over a work queue: at most ``concurrency`` handlers at once, a key never
handled twice at once, a failure logged and its key done, and everything stopped with the
stop event."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from controller.runtime.pool import serve
from controller.runtime.queue import WorkQueue
from tests.support.waiting import eventually


class Handler:
    """Handles a key by waiting until the test opens the gate; counts what ran."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.running: Counter[int] = Counter()
        self.most = 0
        self.handled: list[int] = []
        self.fail: set[int] = set()

    async def __call__(self, key: int) -> None:
        self.running[key] += 1
        self.most = max(self.most, sum(self.running.values()))
        assert self.running[key] == 1, f"key {key} handled twice at once"
        try:
            await self.gate.wait()
            if key in self.fail:
                raise RuntimeError(f"handler of {key} failed")
            self.handled.append(key)
        finally:
            self.running[key] -= 1


@contextlib.asynccontextmanager
async def serving(
    queue: WorkQueue[int], handler: Handler, concurrency: int
) -> AsyncIterator[asyncio.Task[None]]:
    stop = asyncio.Event()
    task = asyncio.create_task(serve(queue, handler, concurrency=concurrency, stop=stop))
    try:
        yield task
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


async def test_no_more_handlers_run_at_once_than_the_bound_and_every_key_is_handled() -> None:
    queue: WorkQueue[int] = WorkQueue("t")
    handler = Handler()
    async with serving(queue, handler, concurrency=3):
        for key in range(20):
            queue.add(key)
        await eventually(lambda: sum(handler.running.values()) == 3, "three handlers")
        assert len(queue) == 17, "keys beyond the bound wait in the queue"
        handler.gate.set()
        await eventually(lambda: len(handler.handled) == 20, "every key handled")
    assert handler.most == 3
    assert sorted(handler.handled) == list(range(20))


async def test_a_key_added_while_handled_is_handled_again_after_never_twice_at_once() -> None:
    queue: WorkQueue[int] = WorkQueue("t")
    handler = Handler()
    async with serving(queue, handler, concurrency=4):
        queue.add(7)
        await eventually(lambda: handler.running[7] == 1, "the first handling")
        queue.add(7)
        queue.add(7)
        await asyncio.sleep(0)
        assert handler.running[7] == 1 and queue.in_flight == 1
        handler.gate.set()
        await eventually(lambda: handler.handled == [7, 7], "the second handling")
        await eventually(lambda: queue.in_flight == 0, "the key done")


async def test_a_failing_handler_is_logged_and_its_key_done(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue: WorkQueue[int] = WorkQueue("agent-reads")
    handler = Handler()
    handler.fail = {1}
    handler.gate.set()
    with caplog.at_level(logging.ERROR, logger="controller.manager"):
        async with serving(queue, handler, concurrency=2):
            queue.add(1)
            queue.add(2)
            await eventually(lambda: handler.handled == [2], "the other key handled")
            await eventually(lambda: queue.in_flight == 0, "the failed key done")
            handler.fail = set()
            queue.add(1)  # handed out again: it was done, not stuck in flight
            await eventually(lambda: handler.handled == [2, 1], "the key handled again")
    failures = [r for r in caplog.records if r.getMessage() == "queued work failed"]
    assert len(failures) == 1 and failures[0].exc_info is not None


async def test_stop_cancels_running_handlers_and_shuts_the_queue_down() -> None:
    queue: WorkQueue[int] = WorkQueue("t")
    handler = Handler()
    async with serving(queue, handler, concurrency=2) as task:
        queue.add(1)
        queue.add(2)
        queue.add(3)
        await eventually(lambda: sum(handler.running.values()) == 2, "two handlers")
    assert task.done() and task.exception() is None
    assert sum(handler.running.values()) == 0 and handler.handled == []
    queue.add(4)
    assert len(queue) == 0, "a stopped pool's queue takes no more keys"
