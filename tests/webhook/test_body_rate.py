"""Bodies judged by their recent rate, in-process over real TLS sockets.

A body holds its share of the body budget while it moves at ``min_body_rate`` or faster over
the last ``RATE_WINDOW``; behind it (after the ``BODY_STALL`` every body is given) it is shed
for a body that needs the room, however fast it once was and though it never stops. The last
part of the budget is kept for small bodies: large bodies never leave a review without room.
The held bodies' deadlines are far beyond what each test takes, so only the rate frees them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

from tests.support import loop_clock
from tests.webhook.rawhttps import (
    REVIEW,
    Server,
    body_head,
    budget_limits,
    read_answer,
    request_bytes,
    sending,
    serving,
    until,
)
from wspin.http.limits import BODY_STALL, SMALL_BODY_BYTES, SMALL_BODY_SHARE

LARGE = REVIEW + b" " * (SMALL_BODY_BYTES * 2)
"""A review padded past the small-body size: still a valid review."""


def budget_for(room: int) -> int:
    """The body budget whose share for large bodies is ``room``."""
    return room * SMALL_BODY_SHARE // (SMALL_BODY_SHARE - 1) + SMALL_BODY_SHARE


def stalled_bodies(server: Server) -> int:
    assert server.http is not None
    now = asyncio.get_running_loop().time()
    return sum(c.stalled(now) for c in server.http.bodies)


async def answer_status(server: Server, body: bytes) -> int:
    reader, writer = await server.connect()
    writer.write(request_bytes(body))
    answer = await read_answer(reader)
    writer.close()
    return answer.status


async def test_a_slow_body_that_never_stops_is_shed_below_the_minimum_rate() -> None:
    """A byte every 50 ms is never silent for the stall time, but far below 64 KiB/s: shed for
    a review that needs its room. (Without the rate check only silence would count, and the
    review would be refused.)"""
    async with serving(budget_limits(1.5)) as server:
        assert server.http is not None
        http = server.http
        _, slow = await server.connect()
        slow.write(body_head(len(REVIEW)) + REVIEW[: len(REVIEW) * 3 // 4])
        async with sending(slow, b" ", 0.05):
            await until(lambda: stalled_bodies(server) == 1)
            assert await answer_status(server, REVIEW) == 200
            assert http.refusals.counts.get("stalled-body") == 1
        slow.close()


async def test_a_body_that_trickles_after_a_burst_is_shed_within_the_rate_window() -> None:
    """Half a megabyte at once, then a byte every 0.3 s: on average since its headers it stays
    above 64 KiB/s for eight seconds, but its recent rate falls behind within the window, and
    it is shed for a large body that needs the room. On the loop's clock, stopped and moved by
    hand between the bytes (``tests/support/loop_clock.py``)."""
    burst = 512 * 1024
    budget = budget_for(burst + len(LARGE) // 2)
    limits = dataclasses.replace(budget_limits(1), max_buffered_body_bytes=budget)
    clock = loop_clock.install()
    async with serving(limits) as server:
        assert server.http is not None
        http = server.http
        _, trickle = await server.connect()
        trickle.write(body_head(2 * burst) + b" " * burst)
        await loop_clock.until(lambda: http.buffered >= burst)
        waited = 0.0
        while not stalled_bodies(server):
            assert waited < 3.0, "still not behind the rate"
            received = http.buffered
            trickle.write(b" ")
            await loop_clock.until(lambda: http.buffered > received)  # noqa: B023
            await clock.advance(0.3)
            waited += 0.3
        assert await answer_status(server, LARGE) == 200
        assert http.refusals.counts.get("stalled-body") == 1
        trickle.close()
        clock.resume()


async def test_a_body_moving_above_the_minimum_rate_keeps_its_share() -> None:
    """32 KiB every 50 ms is ten times the minimum rate: past the stall time it is still not
    shed, a large newcomer that does not fit is refused, and the moving body is answered. On
    the loop's clock, moved 50 ms once each piece is in."""
    size = 1024 * 1024
    body = REVIEW + b" " * (size - len(REVIEW))
    limits = dataclasses.replace(budget_limits(1), max_buffered_body_bytes=budget_for(size))
    clock = loop_clock.install()
    async with serving(limits) as server:
        assert server.http is not None
        http = server.http
        reader, moving = await server.connect()
        moving.write(body_head(size))
        piece, sent = 32 * 1024, 0
        newcomer = None
        started = clock()
        while sent < size:
            moving.write(body[sent : sent + piece])
            await moving.drain()
            sent += piece
            if sent < size:
                await loop_clock.until(lambda: http.buffered >= sent)  # noqa: B023
            if sent == size - 2 * piece:  # the newcomer would not fit beside it
                assert clock() - started > BODY_STALL
                assert stalled_bodies(server) == 0
                newcomer = await answer_status(server, LARGE)
            await clock.advance(0.05)
        assert newcomer == 503
        assert (await read_answer(reader)).status == 200
        assert "stalled-body" not in http.refusals.counts
        moving.close()
        clock.resume()


async def test_large_bodies_in_progress_leave_room_for_a_review() -> None:
    """Large bodies may fill all but the last eighth of the budget; a review still fits, a
    further large body does not."""
    budget = 8 * len(LARGE)
    limits = dataclasses.replace(budget_limits(1), max_buffered_body_bytes=budget, min_body_rate=1)
    async with serving(limits) as server:
        assert server.http is not None
        http = server.http
        held = []
        while http.buffered + len(LARGE) <= budget - budget // SMALL_BODY_SHARE:
            _, writer = await server.connect()
            writer.write(body_head(len(LARGE) + 1000) + LARGE)
            held.append(writer)
            await until(lambda: http.buffered >= len(held) * len(LARGE))
        # Each held body sends a byte every 0.2 s, above the minimum rate: never shed.
        async with contextlib.AsyncExitStack() as stack:
            for writer in held:
                await stack.enter_async_context(sending(writer, b" ", 0.2))
            assert await answer_status(server, REVIEW) == 200
            assert await answer_status(server, LARGE) == 503
        for writer in held:
            writer.close()
