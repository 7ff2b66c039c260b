"""Hostile clients against the admission port, over real TLS sockets.

The deadline tests run the server in-process with small deadlines. The attacks run
``wspin webhook`` as deployed, in its own process, so its memory can be read: during each
attack a real review on a new connection is answered within 2 s and the process stays under
200 MiB; afterwards its RSS falls back to within 20 MiB of idle within 30 s. Attack sizes scale
with limits lowered by flags, except where the default is the point (the handshake flood runs
3,000 connections against the default cap of 1,000).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support import loop_clock
from tests.support.loop_clock import LoopClock
from tests.support.waiting import eventually
from tests.webhook.conftest import SERVICE_HOST, load_capture
from tests.webhook.rawhttps import (
    REVIEW,
    Server,
    WebhookProcess,
    answered,
    body_head,
    gather_bounded,
    get,
    read_answer,
    request_bytes,
    seconds_until_closed,
    sending,
    serving,
    slow_reader,
    until,
    webhook_process,
)
from wspin.http.limits import BODY_STALL, RATE_WINDOW, ConnectionLimits

LIMITS = ConnectionLimits(
    handshake_timeout=0.5, header_timeout=0.5, body_timeout=0.5, idle_timeout=1.5
)
ANSWER_WITHIN = 2.0
"""Seconds: a real review during an attack."""
MAX_RSS = 200.0
"""MiB: the process during an attack."""


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async with serving(LIMITS) as running:
        yield running


# -- deadlines -------------------------------------------------------------------------------
# On the loop's clock, moved by hand (``tests/support/loop_clock.py``): each deadline is far
# beyond how long a test takes, and the clock is walked to a second before it (still open) and
# past it (closed).

DEADLINES = ConnectionLimits(
    handshake_timeout=30, header_timeout=30, body_timeout=30, idle_timeout=90
)


@pytest.fixture
async def clocked() -> AsyncIterator[tuple[Server, LoopClock]]:
    clock = loop_clock.install()
    async with serving(DEADLINES) as running:
        try:
            yield running, clock
        finally:
            clock.resume()  # the shutdown may wait on its own timers


def open_after_a_sweep(server: Server, count: int = 1) -> None:
    """The deadline sweep has looked (the clock just moved) and kept ``count`` connections."""
    assert server.http is not None
    assert len(server.http.connections) == count


async def closed_by_the_sweep(server: Server, reader: asyncio.StreamReader, left: int = 0) -> None:
    """The deadline sweep has looked (the clock just moved) and closed the connection: the
    server holds ``left`` others, and the client reads the end."""
    open_after_a_sweep(server, left)
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while await reader.read(65536):
            pass


async def in_phase(server: Server, phase: str, count: int = 1) -> None:
    """Wait until the server holds ``count`` connections, each in ``phase`` (its deadline is
    armed from the server's side of the handshake or the first byte, not the client's)."""
    assert server.http is not None
    http = server.http

    def there() -> bool:
        phases = [c.phase_name for c in http.connections]
        return phases == [phase] * count

    await loop_clock.until(there)


async def test_half_a_header_is_closed_after_the_header_timeout(
    clocked: tuple[Server, LoopClock],
) -> None:
    server, clock = clocked
    finishing_reader, finishing = await server.connect()
    reader, writer = await server.connect()
    for half in (finishing, writer):
        half.write(request_bytes()[:40])
        await half.drain()
    await in_phase(server, "header", 2)
    await clock.advance(DEADLINES.header_timeout - 1)
    open_after_a_sweep(server, 2)
    finishing.write(request_bytes()[40:])  # within the timeout: answered
    assert (await read_answer(finishing_reader)).status == 200
    await clock.advance(1.5)
    await closed_by_the_sweep(server, reader, left=1)  # the finished one stays, idle
    writer.close()
    finishing.close()


async def test_a_connection_that_never_sends_is_closed_after_the_header_timeout(
    clocked: tuple[Server, LoopClock],
) -> None:
    server, clock = clocked
    reader, writer = await server.connect()
    await in_phase(server, "idle")
    await clock.advance(DEADLINES.header_timeout - 1)
    open_after_a_sweep(server)
    await clock.advance(1.5)
    await closed_by_the_sweep(server, reader)
    writer.close()


async def test_a_connection_that_never_finishes_its_handshake_is_closed(
    clocked: tuple[Server, LoopClock],
) -> None:
    server, clock = clocked
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello's start
    await writer.drain()
    await in_phase(server, "handshake")
    await clock.advance(DEADLINES.handshake_timeout - 1)
    open_after_a_sweep(server)
    await clock.advance(1.5)
    await closed_by_the_sweep(server, reader)
    writer.close()


async def test_half_a_body_is_closed_after_the_body_timeout(
    clocked: tuple[Server, LoopClock],
) -> None:
    server, clock = clocked
    reader, writer = await server.connect()
    whole = request_bytes()
    writer.write(whole[: len(whole) - len(REVIEW) // 2])
    await writer.drain()
    assert server.http is not None
    http = server.http
    await loop_clock.until(lambda: len(http.bodies) == 1)
    await clock.advance(DEADLINES.body_timeout - 1)
    open_after_a_sweep(server)
    await clock.advance(1.5)
    await closed_by_the_sweep(server, reader)
    writer.close()


async def test_a_body_trickled_byte_by_byte_is_cut_at_the_deadline(
    clocked: tuple[Server, LoopClock],
) -> None:
    """The deadline is for the whole body, not per read: trickling does not extend it."""
    server, clock = clocked
    reader, writer = await server.connect()
    whole = request_bytes()
    writer.write(whole[: len(whole) - len(REVIEW)])
    await writer.drain()
    assert server.http is not None
    http = server.http
    await loop_clock.until(lambda: len(http.bodies) == 1)
    for byte in REVIEW[: int(DEADLINES.body_timeout) - 1]:  # a byte a second
        writer.write(bytes([byte]))
        await writer.drain()
        await clock.advance(1)
    open_after_a_sweep(server)
    writer.write(REVIEW[29:30])
    await clock.advance(1.5)
    await closed_by_the_sweep(server, reader)
    writer.close()


async def test_an_idle_keep_alive_connection_outlives_the_request_deadlines(
    clocked: tuple[Server, LoopClock],
) -> None:
    server, clock = clocked
    reader, writer = await server.connect()
    assert await answered(reader, writer)
    # Twice the header and body timeouts, under the idle timeout: still open.
    await clock.advance(2 * DEADLINES.header_timeout)
    assert await answered(reader, writer)
    await clock.advance(DEADLINES.idle_timeout - 1)
    open_after_a_sweep(server)
    await clock.advance(1.5)
    await closed_by_the_sweep(server, reader)
    writer.close()


# -- the connection cap ----------------------------------------------------------------------
# On the loop's clock, stopped: a connection closed while it stands still was closed at once,
# by the cap, not by any deadline.


async def ended(reader: asyncio.StreamReader) -> None:
    """Read and discard until the server has closed the connection."""
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while await reader.read(65536):
            pass


async def test_at_the_cap_the_longest_idle_connection_makes_room() -> None:
    clock = loop_clock.install()
    async with serving(ConnectionLimits(max_connections=4)) as running:
        held = [await running.connect() for _ in range(4)]
        for reader, writer in held:
            assert await answered(reader, writer)
        reader, writer = await running.connect()
        assert await answered(reader, writer)  # admitted: the first one gave way
        await ended(held[0][0])
        assert clock.stopped is not None
        for other_reader, other in held[1:]:
            assert await answered(other_reader, other)  # the others are still served
        for _, other in [*held, (reader, writer)]:
            other.close()
        clock.resume()


async def test_at_the_cap_a_new_connection_is_refused_only_when_every_one_is_busy() -> None:
    """Bodies that move at the minimum rate (here a byte a second, the clock stopped) are
    busy: the newcomer is refused, and each body is answered once it is whole."""
    limits = ConnectionLimits(
        max_connections=3, header_timeout=10, body_timeout=10, min_body_rate=1
    )
    clock = loop_clock.install()
    async with serving(limits) as running:
        body = REVIEW + b" " * 100
        busy = []
        async with contextlib.AsyncExitStack() as moving:
            for _ in range(3):  # each has its headers in and sends its body a byte at a time
                reader, writer = await running.connect()
                writer.write(body_head(len(body)) + body[: len(REVIEW)])
                sent = await moving.enter_async_context(sending(writer, b" ", 0.2))
                busy.append((reader, writer, sent))
            assert running.http is not None
            http = running.http
            await loop_clock.until(lambda: len(http.bodies) == 3)
            reader, writer = await asyncio.open_connection("127.0.0.1", running.port)
            await ended(reader)
            assert http.refusals.counts["connection-cap"] == 1
            writer.close()
        for busy_reader, busy_writer, sent in busy:  # the busy ones finish and are answered
            busy_writer.write(b" " * (len(body) - len(REVIEW) - sent.bytes))
            answer = await read_answer(busy_reader)
            assert answer.status == 200
            busy_writer.close()
        clock.resume()


async def test_at_the_cap_the_oldest_body_behind_the_rate_makes_room() -> None:
    """Every connection has its headers in and one body byte sent: the oldest is behind the
    minimum rate and gives way; a connection whose request is whole and waits to be answered
    (a client reading nothing) is never the one."""
    limits = ConnectionLimits(
        max_connections=3, header_timeout=10, body_timeout=10, send_timeout=30
    )
    clock = loop_clock.install()
    async with serving(limits) as running:
        assert running.http is not None
        http = running.http
        trickling = []
        for _ in range(2):
            reader, writer = await running.connect()
            writer.write(body_head(len(REVIEW)) + REVIEW[:1])
            trickling.append((reader, writer))
            await loop_clock.until(lambda: len(http.bodies) == len(trickling))
        await clock.advance(1)  # one byte does not pay for a second at 64 KiB/s: both behind
        oldest, newer = http.bodies
        # The third: whole requests it does not read the answers of (its reading paused, in
        # the middle of a pipelined body), the least progress on the wire, but all answers.
        answering = await slow_reader(running, 400)
        await loop_clock.until(
            lambda: any(c.answering and c in http.bodies for c in http.connections)
        )
        (slow,) = http.connections - {oldest, newer}
        review_reader, review = await running.connect()
        assert await answered(review_reader, review)
        review.close()
        await ended(trickling[0][0])
        assert http.refusals.counts["evicted"] == 1
        assert "connection-cap" not in http.refusals.counts
        assert oldest not in http.connections
        assert {newer, slow} <= http.connections
        answering.transport.abort()
        for _, writer in trickling:
            writer.close()
        clock.resume()


# -- attacks on the webhook process -----------------------------------------------------------


async def holds_up(webhook: WebhookProcess) -> None:
    """During an attack: a real review on a new connection and a kubelet's ``GET /healthz`` on
    the probe port answered in time, and bounded memory."""
    seconds = await webhook.server.review_seconds()
    assert seconds < ANSWER_WITHIN, f"a review took {seconds:.2f} s"
    seconds = await webhook.healthz_seconds()
    assert seconds < ANSWER_WITHIN, f"GET /healthz took {seconds:.2f} s"
    assert webhook.rss() < MAX_RSS, f"RSS {webhook.rss():.0f} MiB"


async def recovers(webhook: WebhookProcess, idle: float) -> None:
    """After an attack: RSS back within 20 MiB of idle within 30 s, still answering."""
    await until(lambda: webhook.rss() < idle + 20, timeout=30)
    await holds_up(webhook)


async def test_an_idle_keep_alive_flood_never_locks_out_a_review(tmp_path: Path) -> None:
    """Twice the cap of idle keep-alive connections, each with one request answered: each
    new one closes the one idle longest, and a review on a new connection still gets in."""
    cap = 64
    async with webhook_process(tmp_path, "--max-connections", str(cap)) as webhook:
        idle = webhook.rss()
        flood = []
        for _ in range(2 * cap):
            reader, writer = await webhook.server.connect()
            writer.write(get("/healthz"))
            assert (await read_answer(reader)).status == 200
            flood.append((reader, writer))
        await holds_up(webhook)
        # The oldest were closed to admit the newest; the newest are still open.
        assert await seconds_until_closed(flood[0][0]) < 1.0
        writer = flood[-1][1]
        writer.write(get("/healthz"))
        assert (await read_answer(flood[-1][0])).status == 200
        for _, writer in flood:
            writer.close()
        await recovers(webhook, idle)


async def test_a_flood_of_handshakes_that_never_finish_at_the_default_cap(
    tmp_path: Path,
) -> None:
    """3,000 TCP connections that never finish (or never start) the TLS handshake against the
    default limits: the cap counts them from accept, each new one closes the one waiting
    longest, and a review on a new connection still gets in while the flood goes on."""
    async with webhook_process(tmp_path) as webhook:
        idle = webhook.rss()
        loop = asyncio.get_running_loop()
        sockets: list[socket.socket] = []

        async def connect(hello: bool) -> None:
            sock = socket.socket()
            sock.setblocking(False)
            await loop.sock_connect(sock, ("127.0.0.1", webhook.server.port))
            if hello:
                await loop.sock_sendall(sock, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
            sockets.append(sock)

        try:
            for batch in range(0, 3000, 100):
                await asyncio.gather(*(connect(i % 2 == 0) for i in range(batch, batch + 100)))
            await holds_up(webhook)

            # The flood goes on at 500 connections a second (a cap's worth every 2 s) while
            # reviews come in.
            async def go_on() -> None:
                for _ in range(30):
                    await asyncio.gather(*(connect(True) for _ in range(50)))
                    await asyncio.sleep(0.1)

            more = asyncio.ensure_future(go_on())
            while not more.done():
                await holds_up(webhook)
            await more
        finally:
            for sock in sockets:
                sock.close()
        await recovers(webhook, idle)


async def test_a_thousand_bodies_that_stopped_after_one_byte_never_lock_out_a_review(
    tmp_path: Path,
) -> None:
    """The default cap's worth of TLS connections, each with a review's headers and one body
    byte sent: each is behind the minimum rate, so a review or a probe arriving meanwhile
    closes the oldest; the body deadline is far off, so only that rule makes room."""
    async with webhook_process(tmp_path, "--body-timeout", "60") as webhook:
        idle = webhook.rss()
        cap = ConnectionLimits().max_connections
        flood: list[asyncio.StreamWriter] = []

        async def stall() -> None:
            _, writer = await webhook.server.connect()
            writer.write(body_head(len(REVIEW)) + REVIEW[:1])
            await writer.drain()
            flood.append(writer)

        await gather_bounded([stall] * cap)
        await until(lambda: len(flood) == cap)
        assert await webhook.sample("wspin_http_connections", port="admission") == cap
        for _ in range(3):
            await holds_up(webhook)
        assert await webhook.refusals("evicted") >= 1
        assert await webhook.refusals("connection-cap") == 0
        for writer in flood:
            writer.transport.abort()
        await recovers(webhook, idle)


async def test_a_thousand_bodies_that_stopped_never_lock_out_the_kubelets_probe(
    tmp_path: Path,
) -> None:
    """The same on the plain probe and metrics port the kubelet probes: a POST head and one
    body byte on each of 1,000 connections; ``GET /healthz`` on a new connection is answered."""
    async with webhook_process(tmp_path, "--body-timeout", "60") as webhook:
        idle = webhook.rss()
        cap = ConnectionLimits().max_connections
        flood: list[asyncio.StreamWriter] = []

        async def stall() -> None:
            _, writer = await asyncio.open_connection("127.0.0.1", webhook.metrics_port)
            writer.write(body_head(100, b"/healthz") + b"{")
            await writer.drain()
            flood.append(writer)

        await gather_bounded([stall] * cap)
        await until(lambda: len(flood) == cap)
        assert await webhook.refusals("evicted", port="metrics") >= 1  # the scrape itself
        for _ in range(3):
            await holds_up(webhook)
        assert await webhook.refusals("connection-cap", port="metrics") == 0
        for writer in flood:
            writer.transport.abort()
        await recovers(webhook, idle)


async def test_never_ending_trailers_are_refused_from_the_head(tmp_path: Path) -> None:
    """64 connections send a chunked review whose trailer field never ends, and reconnect as
    soon as they are closed: each is answered 411 from its head, before any chunk or trailer
    is read, and what it sends after is discarded up to the linger bound."""
    async with webhook_process(tmp_path) as webhook:
        idle = webhook.rss()
        head = (
            b"POST /mutate-pods HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n0\r\nX-Trailer: "
        )
        statuses: list[int] = []
        attacking = True

        async def attack() -> None:
            while attacking:
                reader, writer = await webhook.server.connect()
                writer.write(head)
                statuses.append((await read_answer(reader)).status)
                with contextlib.suppress(ConnectionError, ssl.SSLError, TimeoutError):
                    while attacking:
                        writer.write(b"a" * 65536)
                        await asyncio.wait_for(writer.drain(), 5)
                writer.transport.abort()

        attackers = [asyncio.ensure_future(attack()) for _ in range(64)]
        await until(lambda: len(statuses) >= 64)
        for _ in range(3):
            await holds_up(webhook)
        attacking = False
        await asyncio.gather(*attackers)
        assert set(statuses) == {411}
        await recovers(webhook, idle)


async def test_bodies_that_trickle_after_a_burst_are_shed_for_reviews(tmp_path: Path) -> None:
    """40 connections each send 2 MiB of a 3 MiB body at once, then a byte every 0.3 s, and
    reconnect when shed or refused: more than the default 64 MiB body budget. Reviews fit in the
    share kept for small bodies, and the attackers' own new bodies shed the trickling ones once
    their recent rate has fallen behind (a body over that share competes with them for the
    room those sheds make)."""
    async with webhook_process(tmp_path, "--body-timeout", "30") as webhook:
        idle = webhook.rss()
        burst = 2 * 1024 * 1024
        attacking = True
        bursts = 0

        async def trickle() -> None:
            nonlocal bursts
            while attacking:
                reader, writer = await webhook.server.connect()
                writer.write(body_head(3 * 1024 * 1024) + b" " * burst)
                bursts += 1
                with contextlib.suppress(ConnectionError, ssl.SSLError, TimeoutError):
                    while attacking and not reader.at_eof():
                        await asyncio.wait_for(writer.drain(), 5)
                        with contextlib.suppress(TimeoutError):
                            if await asyncio.wait_for(reader.read(65536), 0.3):
                                break  # refused or shed: its answer came
                        writer.write(b" ")
                writer.transport.abort()

        attackers = [asyncio.ensure_future(trickle()) for _ in range(40)]
        await until(lambda: bursts >= 40)
        for _ in range(3):
            await holds_up(webhook)
        await eventually(lambda: webhook.refusals("stalled-body"), "a trickling body shed")
        attacking = False
        await asyncio.gather(*attackers)
        await recovers(webhook, idle)


def absurd_pod_review(mounts: int) -> bytes:
    """A workspace pod whose containers carry ``mounts`` copies of the agentd mount: each
    would be a removal in the patch, an answer far larger than the gzip-compressed request."""
    review = load_capture("pod-create-workspace.json")
    containers = review["request"]["object"]["spec"]["containers"]
    forged = {"name": "agentd", "mountPath": "/agentd", "readOnly": False}
    containers[0].setdefault("volumeMounts", []).extend([forged] * mounts)
    return json.dumps(review, separators=(",", ":")).encode()


async def test_an_absurd_pod_is_denied_with_an_answer_smaller_than_its_request(
    server: Server,
) -> None:
    body = gzip.compress(absurd_pod_review(10_000))
    reader, writer = await server.connect()
    writer.write(request_bytes(body, b"Content-Encoding: gzip\r\n"))
    answer = await read_answer(reader)
    assert answer.status == 200
    response = answer.json()["response"]
    assert response["allowed"] is False
    assert "delivery edits, more than 512" in response["status"]["message"], response
    assert len(answer.body) < len(body)
    writer.close()


async def test_slow_readers_of_pipelined_answers_are_bounded_then_dropped(
    tmp_path: Path,
) -> None:
    """24 connections pipeline reviews and never read: each holds at most its send-queue mark
    plus one answer, reading stops, and after --send-timeout each is dropped."""
    async with webhook_process(tmp_path, "--send-timeout", "2") as webhook:
        idle = webhook.rss()
        slow = []
        for _ in range(24):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", webhook.server.port))
            reader, writer = await asyncio.open_connection(
                sock=sock, ssl=webhook.server.trust, server_hostname=SERVICE_HOST
            )
            writer.write(request_bytes() * 400)  # 3.6 MiB of reviews; their answers are 1.2 MiB
            slow.append((reader, writer))
        started = time.monotonic()
        await holds_up(webhook)
        # Dropped at the send timeout (2 s, and a sweep), not the idle one (120 s).
        while await webhook.refusals("send-timeout") < len(slow):
            assert time.monotonic() - started < 6
            await asyncio.sleep(0.05)
        for reader, _ in slow:  # what was sent before the drop, then the end
            assert await seconds_until_closed(reader, 5) < 5
        for _, writer in slow:
            writer.close()
        await recovers(webhook, idle)


async def test_a_pipelining_flood_does_not_hold_up_a_review(tmp_path: Path) -> None:
    """32 connections pipelining tiny requests as fast as they can, reading the answers as
    fast as they come: a connection gets --max-pipelined-requests answers per turn of the
    event loop, so a review on a new connection waits one turn, not the whole flood."""
    async with webhook_process(tmp_path) as webhook:
        idle = webhook.rss()
        batch = get("/healthz") * 1000
        answers = 0
        writers: list[asyncio.StreamWriter] = []

        async def flood() -> None:
            reader, writer = await webhook.server.connect()
            writers.append(writer)

            async def drain() -> None:
                nonlocal answers
                while data := await reader.read(65536):
                    answers += data.count(b"HTTP/1.1 200")

            draining = asyncio.ensure_future(drain())
            try:
                while True:
                    writer.write(batch)
                    await writer.drain()
            finally:
                draining.cancel()

        flooding = [asyncio.ensure_future(flood()) for _ in range(32)]
        await until(lambda: answers > 10_000)  # the flood is being served
        for _ in range(4):
            await holds_up(webhook)
        for task in flooding:
            task.cancel()
        for writer in writers:
            writer.transport.abort()
        await asyncio.gather(*flooding, return_exceptions=True)
        await recovers(webhook, idle)


async def test_stalled_bodies_are_shed_for_a_large_body_that_moves(tmp_path: Path) -> None:
    """Stalled 3 MiB bodies fill the large bodies' share of the body budget: a review still
    fits in the share kept for small bodies, and a large body arriving whole sheds a stalled
    one rather than being refused."""
    budget = 4 * 1024 * 1024
    flags = ("--max-buffered-body-bytes", str(budget), "--body-timeout", "30")
    async with webhook_process(tmp_path, *flags) as webhook:
        idle = webhook.rss()
        stalled = []
        for _ in range(8):  # 8 x 512 KiB: the whole budget, more than large bodies may hold
            reader, writer = await webhook.server.connect()
            writer.write(body_head(3 * 1024 * 1024) + b" " * (512 * 1024))
            await writer.drain()
            stalled.append((reader, writer))
        # The attack is bodies that stopped: they must have been silent past the rate window.
        since = time.monotonic()
        await until(lambda: time.monotonic() - since > max(BODY_STALL, RATE_WINDOW))
        await holds_up(webhook)
        large = REVIEW + b" " * (1024 * 1024)
        reader, writer = await webhook.server.connect()
        writer.write(request_bytes(large))
        assert (await read_answer(reader)).status == 200
        writer.close()
        assert await webhook.refusals("stalled-body") >= 1
        for _, writer in stalled:
            writer.close()
        await recovers(webhook, idle)
