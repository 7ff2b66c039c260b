"""The work queue: de-duplication, one worker per key, delayed adds (in one heap, on one
timer) and per-key backoff."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from controller.runtime.queue import BASE_DELAY, MAX_DELAY, Backoff, ShutDown, WorkQueue
from controller.types import ObjectKey
from tests.support.clock import FakeClock
from tests.support.waker import FakeTimer, FakeWaker

A = ObjectKey("ns", "a")
B = ObjectKey("ns", "b")


def test_backoff_starts_at_5ms_and_doubles() -> None:
    backoff = Backoff()
    delays = [backoff.when(A) for _ in range(5)]
    assert delays == [0.005, 0.01, 0.02, 0.04, 0.08]
    assert BASE_DELAY == 0.005


def test_backoff_is_capped_at_1000_seconds_even_after_many_failures() -> None:
    backoff = Backoff()
    delays = [backoff.when(A) for _ in range(200)]
    assert max(delays) == MAX_DELAY == 1000.0
    assert delays[-1] == 1000.0


def test_backoff_is_per_key_and_forget_resets_it() -> None:
    backoff = Backoff()
    backoff.when(A)
    backoff.when(A)
    assert backoff.when(B) == 0.005
    backoff.forget(A)
    assert backoff.retries(A) == 0
    assert backoff.when(A) == 0.005


async def test_a_key_added_many_times_is_handed_out_once() -> None:
    queue = WorkQueue("t")
    for _ in range(5):
        queue.add(A)
    queue.add(B)
    assert len(queue) == 2
    assert await queue.get() == A
    assert await queue.get() == B
    assert len(queue) == 0


async def test_a_key_added_while_processing_comes_back_after_done_not_before() -> None:
    queue = WorkQueue("t")
    queue.add(A)
    key = await queue.get()
    queue.add(A)  # a change arrived while a worker holds A
    assert len(queue) == 0, "A must not go to a second worker while in flight"
    queue.done(key)
    assert len(queue) == 1
    assert await queue.get() == A


async def test_done_without_a_new_add_does_not_requeue() -> None:
    queue = WorkQueue("t")
    queue.add(A)
    queue.done(await queue.get())
    assert len(queue) == 0


async def test_get_waits_for_an_add() -> None:
    queue = WorkQueue("t")
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert not getter.done()
    queue.add(B)
    assert await asyncio.wait_for(getter, 1) == B


async def test_add_after_queues_the_key_only_after_the_delay() -> None:
    queue = WorkQueue("t")
    queue.add_after(A, 0.05)
    assert len(queue) == 0
    assert await asyncio.wait_for(queue.get(), 2) == A


async def test_of_two_pending_delays_the_earlier_wins() -> None:
    queue = WorkQueue("t")
    queue.add_after(A, 30)
    queue.add_after(A, 0.01)
    assert await asyncio.wait_for(queue.get(), 2) == A
    queue.shut_down()


async def test_add_rate_limited_uses_the_growing_backoff() -> None:
    queue = WorkQueue("t", backoff=Backoff(base=0.001))
    assert queue.add_rate_limited(A) == 0.001
    assert queue.add_rate_limited(A) == 0.002
    queue.forget(A)
    assert queue.add_rate_limited(A) == 0.001
    assert await asyncio.wait_for(queue.get(), 2) == A


async def test_shutdown_wakes_waiting_workers_and_refuses_new_keys() -> None:
    queue = WorkQueue("t")
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)
    queue.shut_down()
    for getter in getters:
        with pytest.raises(ShutDown):
            await asyncio.wait_for(getter, 1)
    queue.add(A)
    queue.add_after(A, 0.001)
    assert len(queue) == 0


async def test_shutdown_lets_an_in_flight_key_finish_without_requeue() -> None:
    queue = WorkQueue("t")
    queue.add(A)
    key = await queue.get()
    queue.add(A)
    queue.shut_down()
    queue.done(key)
    assert len(queue) == 0
    with pytest.raises(ShutDown):
        await queue.get()


async def test_depth_is_reported_as_it_changes() -> None:
    depths: list[int] = []
    queue = WorkQueue("t", on_depth=depths.append)
    queue.add(A)
    queue.add(B)
    await queue.get()
    assert depths == [1, 2, 1]


async def test_a_key_is_held_while_waiting_in_flight_or_delayed_and_says_when_it_is_due() -> None:
    queue = WorkQueue("t")
    assert not queue.holds(A) and queue.delay_of(A) is None
    queue.add(A)
    assert queue.holds(A)
    key = await queue.get()
    assert queue.holds(key)  # in flight
    queue.done(key)
    assert not queue.holds(A)
    queue.add_after(A, 30)
    delay = queue.delay_of(A)
    assert queue.holds(A) and delay is not None and 29 < delay <= 30
    queue.shut_down()
    assert not queue.holds(A) and queue.delay_of(A) is None


class CountingWaker(FakeWaker):
    """Fake timers that count the ones set, and those still pending (neither fired nor
    cancelled)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.set = 0

    def call_at(self, when: float, callback: Callable[..., object], *args: Any) -> FakeTimer:
        self.set += 1
        return super().call_at(when, callback, *args)

    def pending(self) -> int:
        return sum(1 for _, _, timer in self._due if not timer.cancelled)


def fake_timers() -> CountingWaker:
    return CountingWaker(FakeClock())


async def test_delayed_adds_come_out_in_the_order_of_their_moments_on_the_given_timers() -> None:
    timers = fake_timers()
    queue: WorkQueue[tuple[str, str]] = WorkQueue("reads", timers=timers)
    for index, delay in enumerate([30.0, 10.0, 20.0, 10.0]):
        queue.add_after(("target", str(index)), delay)
    timers.advance(9.9)
    assert len(queue) == 0
    timers.advance(0.1)
    assert [await queue.get(), await queue.get()] == [("target", "1"), ("target", "3")]
    timers.advance(15)
    assert await queue.get() == ("target", "2")
    assert queue.delay_of(("target", "0")) == pytest.approx(5.0)
    timers.advance(5)
    assert await queue.get() == ("target", "0")
    assert not queue.holds(("target", "9"))


async def test_ten_thousand_delayed_adds_hold_one_timer_not_one_each() -> None:
    timers = fake_timers()
    queue: WorkQueue[int] = WorkQueue("reads", timers=timers)
    for key in range(10_000):
        queue.add_after(key, 1.0 + key % 100)
    assert timers.pending() == 1
    timers.advance(1.0)
    assert len(queue) == 100 and timers.pending() == 1
    queue.shut_down()
    assert timers.pending() == 0


async def test_a_cancelled_delayed_add_never_comes_and_its_entries_are_compacted() -> None:
    timers = fake_timers()
    queue: WorkQueue[int] = WorkQueue("reads", timers=timers)
    queue.add_after(1, 5.0)
    queue.add_after(2, 5.0)
    queue.cancel(1)
    assert not queue.holds(1) and queue.delay_of(1) is None
    timers.advance(5.0)
    assert len(queue) == 1 and await queue.get() == 2
    # Delayed adds made and cancelled over and over leave a bounded heap behind.
    for round_ in range(1000):
        queue.add_after(round_, 60.0)
        queue.cancel(round_)
    assert len(queue._delays) <= 64 + 2


async def test_an_earlier_delayed_add_moves_the_one_timer_forward() -> None:
    timers = fake_timers()
    queue: WorkQueue[int] = WorkQueue("reads", timers=timers)
    queue.add_after(1, 60.0)
    queue.add_after(2, 1.0)
    queue.add_after(1, 90.0)  # later than its pending add: the earlier stays
    assert timers.pending() == 1
    timers.advance(1.0)
    assert await queue.get() == 2
    assert queue.delay_of(1) == pytest.approx(59.0)


async def test_a_timer_that_runs_late_adds_every_key_due_by_then_at_once() -> None:
    timers = fake_timers()
    queue: WorkQueue[int] = WorkQueue("reads", timers=timers)
    for key in range(100):
        queue.add_after(key, 1.0 + key / 100)
    timers.advance(5.0)  # a busy event loop: the timer for the first runs after the last
    assert len(queue) == 100
    assert timers.set == 1, "one turn of the timer, not one per key"
