"""The HTTP server's fairness and output bounds and its bounded shutdown, in-process over
real TLS sockets, with the server's own state read where a client cannot see it."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.webhook.rawhttps import (
    QUICK,
    REVIEW,
    answered,
    get,
    read_answer,
    request_bytes,
    review_for,
    seconds_until_closed,
    serving,
    slow_reader,
    until,
)
from wspin.http.limits import ConnectionLimits

# -- fairness and output bounds --------------------------------------------------------------


async def test_a_connection_pipelining_thousands_does_not_hold_up_another() -> None:
    """One write of 6,000 pipelined requests is answered 16 per turn of the event loop, so
    a review on another connection is answered long before the last of them."""
    async with serving(QUICK) as server:
        reader, writer = await server.connect()
        answers = 0

        async def count() -> None:
            nonlocal answers
            while data := await reader.read(65536):
                answers += data.count(b"HTTP/1.1 200")

        counting = asyncio.ensure_future(count())
        writer.write(get("/healthz") * 6000)
        await until(lambda: answers > 0)
        assert await server.review_seconds() < 2
        assert answers < 6000
        await until(lambda: answers == 6000)
        writer.close()
        await counting


async def test_a_client_that_does_not_read_holds_at_most_its_mark_and_one_answer() -> None:
    limits = ConnectionLimits(header_timeout=10, body_timeout=10, send_timeout=30)
    async with serving(limits) as server:
        writer = await slow_reader(server, 400)
        assert server.http is not None
        http = server.http
        await until(lambda: any(c.send_deadline < float("inf") for c in http.connections))
        (connection,) = http.connections
        assert connection.queued <= limits.write_buffer_bytes + 8 * 1024
        assert http.queued_output == connection.queued
        writer.transport.abort()


async def test_past_the_output_budget_the_largest_non_readers_are_dropped() -> None:
    limits = ConnectionLimits(
        header_timeout=10, body_timeout=10, send_timeout=30, max_queued_output_bytes=100_000
    )
    async with serving(limits) as server:
        writers = [await slow_reader(server, 400) for _ in range(4)]
        assert server.http is not None
        http = server.http
        await until(lambda: http.refusals.counts.get("output-budget", 0) >= 2)
        assert http.queued_output <= limits.max_queued_output_bytes + limits.write_buffer_bytes
        assert await server.review_seconds() < 2
        for writer in writers:
            writer.transport.abort()


# -- shutdown --------------------------------------------------------------------------------

SHUTDOWN_LIMITS = ConnectionLimits(header_timeout=4.0, body_timeout=4.0, idle_timeout=30.0)
SWEEP = 1.0
"""Seconds: the deadline sweep's period, at most a fifth of a deadline and at most this."""


async def test_shutdown_closes_idle_connections_at_once_and_accepts_no_more() -> None:
    async with serving(SHUTDOWN_LIMITS) as server:
        idle = [await server.connect() for _ in range(3)]
        for reader, writer in idle:
            assert await answered(reader, writer)
        listener = server.http
        assert listener is not None
        started = time.monotonic()
        cleanup = asyncio.ensure_future(listener.shutdown())
        closing = await asyncio.gather(*(seconds_until_closed(r) for r, _ in idle))
        assert max(closing) < 2.0  # half the shortest deadline
        await asyncio.wait_for(cleanup, 2.0)
        assert time.monotonic() - started < 2.0
        with pytest.raises(OSError):
            await server.connect()
        for _, writer in idle:
            writer.close()


async def test_shutdown_answers_a_body_still_arriving_and_cuts_one_that_never_completes() -> None:
    async with serving(SHUTDOWN_LIMITS) as server:
        whole = request_bytes(review_for("draining-1"))
        half = len(whole) - len(REVIEW) // 2
        arriving_reader, arriving = await server.connect()
        stalled_reader, stalled = await server.connect()
        arriving.write(whole[:half])
        stalled.write(request_bytes()[:half])
        await asyncio.gather(arriving.drain(), stalled.drain())
        assert server.http is not None
        http = server.http
        await until(lambda: len(http.bodies) == 2)  # both bodies are half in

        started = time.monotonic()
        cleanup = asyncio.ensure_future(http.shutdown())
        await until(lambda: http.draining)
        await asyncio.sleep(0)  # shutdown has closed what it closes at once, and waits
        assert not cleanup.done()
        assert len(http.connections) == 2  # the two with a body arriving are kept
        arriving.write(whole[half:])
        answer = await read_answer(arriving_reader)
        assert answer.status == 200
        assert answer.json()["response"]["uid"] == "draining-1"
        assert answer.headers["connection"] == "close"  # answered, and closed after
        assert await seconds_until_closed(arriving_reader) < 1.0

        # The stalled body is cut at its deadline, armed before cleanup began, and cleanup
        # returns with it.
        within = SHUTDOWN_LIMITS.body_timeout + SWEEP
        assert await seconds_until_closed(stalled_reader) < within
        await asyncio.wait_for(cleanup, within)
        assert time.monotonic() - started < within
        arriving.close()
        stalled.close()


async def test_shutdown_aborts_a_client_that_stopped_reading_at_the_drain_deadline() -> None:
    limits = ConnectionLimits(send_timeout=60, drain_timeout=1.0)
    async with serving(limits) as server:
        writer = await slow_reader(server, 400)
        assert server.http is not None
        http = server.http
        await until(lambda: any(c.send_deadline < float("inf") for c in http.connections))
        started = time.monotonic()
        await asyncio.wait_for(http.shutdown(), 5)
        assert time.monotonic() - started < limits.drain_timeout + 1.5
        assert not http.connections
        writer.transport.abort()
