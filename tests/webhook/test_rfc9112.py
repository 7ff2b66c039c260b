"""RFC 9112 and RFC 9110 behaviour of the HTTP server, over real TLS sockets: lingering
close after a refusal (§9.6), Host (§3.2) and ``Expect: 100-continue`` (RFC 9110 §10.1.1)."""

from __future__ import annotations

import contextlib
import ssl

import pytest

from tests.support import loop_clock
from tests.webhook.rawhttps import (
    LINGER,
    REVIEW,
    Server,
    budget_limits,
    get,
    hold_body,
    read_answer,
    review_for,
    seconds_until_closed,
    serving,
    until,
)
from webhook.http import MAX_BODY_BYTES
from wspin.http.limits import ConnectionLimits

# -- lingering close -------------------------------------------------------------------------


def oversized_head(size: int = MAX_BODY_BYTES + 1) -> bytes:
    return (
        b"POST /mutate-pods HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % size
    )


async def test_a_client_still_sending_after_a_refusal_reads_the_refusal() -> None:
    """The 413 goes out when the head arrives; the client goes on sending its 3 MiB body
    before it reads. The server reads and discards it (lingering), so the client reads the
    413 rather than a reset, and the connection ends when the client closes."""
    limits = ConnectionLimits(linger_timeout=5)
    async with serving(limits) as server:
        reader, writer = await server.connect()
        writer.write(oversized_head())
        for _ in range(12):
            writer.write(b"x" * (256 * 1024))
            await writer.drain()  # the server keeps reading: the body all goes out
        answer = await read_answer(reader)
        assert answer.status == 413
        assert answer.headers["connection"] == "close"
        assert server.http is not None
        http = server.http
        assert len(http.connections) == 1
        writer.close()
        await until(lambda: not http.connections)


async def test_lingering_ends_after_its_byte_bound() -> None:
    """On the loop's clock, stopped (``tests/support/loop_clock.py``): the time bound cannot
    fire, so the close is the byte bound's."""
    limits = ConnectionLimits(linger_timeout=30, linger_bytes=256 * 1024)
    clock = loop_clock.install()
    async with serving(limits) as server:
        reader, writer = await server.connect()
        writer.write(oversized_head())
        assert (await read_answer(reader)).status == 413
        with contextlib.suppress(ConnectionError):
            for _ in range(64):  # far past the bound: the server stops listening
                writer.write(b"x" * (64 * 1024))
                await writer.drain()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            while await reader.read(65536):
                pass
        assert server.http is not None and not server.http.connections
        writer.close()
        clock.resume()


async def test_lingering_ends_after_its_time_bound() -> None:
    """The client never closes: the time bound ends it, on the loop's stopped clock walked to
    just before it and past it."""
    limits = ConnectionLimits(header_timeout=60, body_timeout=60, linger_timeout=30)
    clock = loop_clock.install()
    async with serving(limits) as server:
        reader, writer = await server.connect()
        writer.write(oversized_head())
        assert (await read_answer(reader)).status == 413
        assert server.http is not None
        await clock.advance(limits.linger_timeout - 1)
        assert len(server.http.connections) == 1
        await clock.advance(1.5)
        assert not server.http.connections
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            while await reader.read(65536):
                pass
        writer.close()
        clock.resume()


# -- Host (RFC 9112 §3.2) ------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers", [b"", b"Host: a\r\nHost: b\r\n"], ids=["without Host", "two Hosts"]
)
async def test_an_http_1_1_request_without_exactly_one_host_is_400(
    server: Server, headers: bytes
) -> None:
    reader, writer = await server.connect()
    writer.write(b"GET /healthz HTTP/1.1\r\n" + headers + b"\r\n" + get("/healthz"))
    answer = await read_answer(reader)
    assert answer.status == 400
    assert answer.json()["error"].startswith("an HTTP/1.1 request needs one Host header")
    assert answer.headers["connection"] == "close"
    assert await seconds_until_closed(reader) < LINGER  # the request after it is not answered
    writer.close()


async def test_an_http_1_0_request_needs_no_host(server: Server) -> None:
    reader, writer = await server.connect()
    writer.write(b"GET /healthz HTTP/1.0\r\n\r\n")
    answer = await read_answer(reader)
    assert (answer.status, answer.body) == (200, b"ok\n")
    writer.close()


# -- Expect: 100-continue (RFC 9110 §10.1.1) -------------------------------------------------


def expecting(path: bytes, body: bytes, version: bytes = b"HTTP/1.1") -> bytes:
    return (
        b"POST %s %s\r\nHost: h\r\nContent-Type: application/json\r\n"
        b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % (path, version, len(body))
    )


async def test_an_http_1_0_expectation_is_ignored(server: Server) -> None:
    reader, writer = await server.connect()
    body = review_for("continue-10")
    writer.write(expecting(b"/mutate-pods", body, b"HTTP/1.0"))
    writer.write(body)
    answer = await read_answer(reader)  # the first bytes back are the final answer
    assert answer.status == 200
    assert answer.json()["response"]["uid"] == "continue-10"
    writer.close()


async def test_no_100_continue_for_a_body_that_will_not_be_read(server: Server) -> None:
    reader, writer = await server.connect()
    writer.write(expecting(b"/nowhere", REVIEW))
    answer = await read_answer(reader)  # the final answer, before any body byte
    assert answer.status == 404
    assert answer.headers["connection"] == "close"
    writer.close()


async def test_no_100_continue_while_the_body_budget_has_no_room() -> None:
    async with serving(budget_limits(1.5)) as server:
        stalled = await hold_body(server)
        reader, writer = await server.connect()
        writer.write(expecting(b"/mutate-pods", REVIEW))
        answer = await read_answer(reader)
        assert answer.status == 503
        writer.close()
        stalled.close()


async def test_an_unknown_expectation_is_417(server: Server) -> None:
    reader, writer = await server.connect()
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: h\r\nExpect: teapot\r\n\r\n")
    assert (await read_answer(reader)).status == 417
    writer.close()
