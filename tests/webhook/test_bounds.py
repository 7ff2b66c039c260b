"""The HTTP server's fairness and output bounds and its bounded shutdown, in-process over
real TLS sockets, with the server's own state read where a client cannot see it."""

from __future__ import annotations

import asyncio
import contextlib
import ssl

import pytest

from tests.support import loop_clock
from tests.webhook.rawhttps import (
    QUICK,
    REVIEW,
    answered,
    get,
    read_answer,
    request_bytes,
    review_for,
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
        other_reader, other = await server.connect()
        assert await answered(other_reader, other)
        other.close()
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
        reader, writer = await server.connect()  # a working client is still answered
        assert await answered(reader, writer)
        writer.close()
        for writer in writers:
            writer.transport.abort()


# -- shutdown --------------------------------------------------------------------------------
# On the loop's clock, stopped and moved by hand (``tests/support/loop_clock.py``): a
# shutdown that returns while the clock stands still waited for no deadline.

SHUTDOWN_LIMITS = ConnectionLimits(
    header_timeout=30.0, body_timeout=30.0, idle_timeout=300.0, drain_timeout=60.0
)


async def test_shutdown_closes_idle_connections_at_once_and_accepts_no_more() -> None:
    clock = loop_clock.install()
    async with serving(SHUTDOWN_LIMITS) as server:
        idle = [await server.connect() for _ in range(3)]
        for reader, writer in idle:
            assert await answered(reader, writer)
        listener = server.http
        assert listener is not None
        cleanup = asyncio.ensure_future(listener.shutdown())
        await loop_clock.until(cleanup.done)  # the clock never moved: no deadline was waited
        assert clock.stopped is not None and not listener.connections
        for reader, _ in idle:
            assert await reader.read() == b""
        with pytest.raises(OSError):
            await server.connect()
        for _, writer in idle:
            writer.close()
        clock.resume()


async def test_shutdown_answers_a_body_still_arriving_and_cuts_one_that_never_completes() -> None:
    clock = loop_clock.install()
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
        await loop_clock.until(lambda: len(http.bodies) == 2)  # both bodies are half in

        cleanup = asyncio.ensure_future(http.shutdown())
        await loop_clock.until(lambda: http.draining)
        await loop_clock.turns()  # shutdown has closed what it closes at once, and waits
        assert not cleanup.done()
        assert len(http.connections) == 2  # the two with a body arriving are kept
        arriving.write(whole[half:])
        answer = await read_answer(arriving_reader)
        assert answer.status == 200
        assert answer.json()["response"]["uid"] == "draining-1"
        assert answer.headers["connection"] == "close"  # answered, and closed after
        assert await arriving_reader.read() == b""

        # The stalled body is cut at its deadline, armed before cleanup began, and cleanup
        # returns with it, long before the drain deadline.
        await clock.advance(SHUTDOWN_LIMITS.body_timeout - 1)
        assert not cleanup.done() and len(http.connections) == 1
        await clock.advance(1.5)
        await loop_clock.until(cleanup.done)
        assert not http.connections
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            assert await stalled_reader.read() == b""
        arriving.close()
        stalled.close()
        clock.resume()


async def test_shutdown_aborts_a_client_that_stopped_reading_at_the_drain_deadline() -> None:
    limits = ConnectionLimits(
        header_timeout=600, body_timeout=600, send_timeout=600, drain_timeout=30.0
    )
    clock = loop_clock.install()
    async with serving(limits) as server:
        writer = await slow_reader(server, 400)
        assert server.http is not None
        http = server.http
        await loop_clock.until(
            lambda: any(c.send_deadline < float("inf") for c in http.connections)
        )
        cleanup = asyncio.ensure_future(http.shutdown())
        await clock.advance(limits.drain_timeout + 1.5)
        await loop_clock.until(cleanup.done)
        assert not http.connections
        writer.transport.abort()
        clock.resume()
