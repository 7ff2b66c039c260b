"""The HTTP/1.1 server (``wspin.http``) under the admission routes, over real TLS sockets.

Raw bytes are written to ``wspin.http.server.serve(make_app(...))`` with a verified TLS
client, and the answers are read back byte for byte. This proves that:

- routing is by path only (unknown path 404 with a JSON reason, the query string ignored),
  the probes refuse methods other than GET and HEAD with 405, every answer carries a
  ``Date``, and an answer to HEAD has no body;
- the head limit (431; a large head under it is answered, also after another request in the
  same read), the body limit (413 on Content-Length before any body byte is read) and the
  body budget across connections hold: a body that is moving keeps its share (503 for the
  newcomer), a stalled one is shed for a moving one, and a cut connection gives its share
  back;
- a body comes with a Content-Length only: ``Transfer-Encoding`` is 411 before any chunk is
  read, so a trailer can neither grow without bound nor change how the body is read;
- after a refusal the server lingers (RFC 9112 §9.6): a client still sending reads the
  refusal, and the lingering ends at its byte or time bound;
- Host (RFC 9112 §3.2) and ``Expect: 100-continue`` (RFC 9110 §10.1.1): exactly one Host in
  HTTP/1.1; 100 only for HTTP/1.1 and only when the body will be read; 417 for another
  expectation;
- pipelined requests are answered in order, also when the client reads nothing for a while,
  and a connection pipelining thousands does not hold up another; a client that does not read
  holds at most its send-queue mark and one answer, and past the output budget the largest
  non-readers are dropped;
- ``Connection: close`` and HTTP/1.0 keep-alive follow RFC 9112;
- a malformed request line, or a body whose length could be read two ways, is a 400 with a
  JSON reason and nothing after it on that connection is answered, while other connections
  are;
- ``shutdown()`` closes idle connections at once, still answers a request already arriving,
  cuts one that never completes at its deadline, and aborts a client that stopped reading at
  the drain deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import socket
import ssl
import time
from collections.abc import AsyncIterator
from email.utils import parsedate_to_datetime

import pytest

from tests.support import loop_clock
from tests.support.loop_clock import LoopClock
from tests.webhook.conftest import SERVICE_HOST
from tests.webhook.rawhttps import (
    LINGER,
    QUICK,
    Server,
    answered,
    budget_limits,
    get,
    hold_body,
    parse_answers,
    read_answer,
    request_bytes,
    review_for,
    seconds_until_closed,
    serving,
    until,
)
from webhook.http import MAX_BODY_BYTES
from wspin.http.limits import ConnectionLimits

MAX_HEAD_BYTES = ConnectionLimits().max_head_bytes


@pytest.fixture
async def clock(server: Server) -> AsyncIterator[LoopClock]:
    """The loop's clock, stopped once ``server`` runs (``tests/support/loop_clock.py``), and
    running again before it shuts down."""
    stopped = loop_clock.install()
    yield stopped
    stopped.resume()


async def ended(reader: asyncio.StreamReader) -> None:
    """Read and discard until the server has closed the connection."""
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while await reader.read(65536):
            pass


async def lingered(clock: LoopClock, reader: asyncio.StreamReader) -> None:
    """After a refusal the server reads and discards for ``linger_timeout``: past it on the
    stopped clock, the connection is closed."""
    await clock.advance(QUICK.linger_timeout + 0.1)
    await ended(reader)


# -- routing, methods, headers -------------------------------------------------------------


async def test_an_unknown_path_is_a_404_with_a_json_reason_and_the_connection_stays(
    server: Server,
) -> None:
    reader, writer = await server.connect()
    writer.write(get("/mutate-pod?token=hunter2"))
    answer = await read_answer(reader)
    assert answer.status == 404
    error = answer.json()
    assert error == {"error": "no endpoint at '/mutate-pod'", "status": 404}
    assert "connection" not in answer.headers
    assert await answered(reader, writer)
    writer.close()


async def test_the_query_string_is_ignored_for_routing(server: Server) -> None:
    reader, writer = await server.connect()
    writer.write(get("/healthz?verbose=1&x=%2Fmutate-pods"))
    answer = await read_answer(reader)
    assert (answer.status, answer.body) == (200, b"ok\n")
    writer.write(get("/readyz?"))
    assert (await read_answer(reader)).status == 200
    body = review_for("q-1")
    writer.write(
        b"POST /mutate-pods?timeout=10s&dryRun=All HTTP/1.1\r\nHost: h\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    answer = await read_answer(reader)
    assert answer.status == 200
    assert answer.json()["response"]["uid"] == "q-1"
    writer.close()


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
@pytest.mark.parametrize("method", [b"POST", b"PUT", b"DELETE"])
async def test_probes_refuse_other_methods_with_405(
    server: Server, path: str, method: bytes
) -> None:
    reader, writer = await server.connect()
    writer.write(
        b"%s %s HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}" % (method, path.encode())
    )
    answer = await read_answer(reader)
    assert answer.status == 405
    assert answer.json()["error"] == f"method {method.decode()} not allowed; send GET"
    writer.close()


async def test_every_answer_carries_a_date(server: Server) -> None:
    reader, writer = await server.connect()
    for request in (get("/healthz"), get("/nowhere"), request_bytes()):
        writer.write(request)
        answer = await read_answer(reader)
        sent = parsedate_to_datetime(answer.headers["date"])
        assert answer.headers["date"].endswith(" GMT")
        now = datetime.datetime.now(datetime.UTC)
        assert abs((now - sent).total_seconds()) < 60
    writer.close()


@pytest.mark.parametrize(
    ("path", "status"), [("/healthz", 200), ("/mutate-pods", 405), ("/nowhere", 404)]
)
async def test_an_answer_to_head_has_no_body_and_the_next_answer_follows(
    server: Server, path: str, status: int
) -> None:
    reader, writer = await server.connect()
    writer.write(b"HEAD %s HTTP/1.1\r\nHost: h\r\n\r\n" % path.encode() + get("/healthz"))
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 %d " % status)
    (length,) = [line for line in head.split(b"\r\n") if line.startswith(b"Content-Length: ")]
    assert int(length.split()[1]) > 0  # the length of the body it does not send
    answer = await read_answer(reader)  # the very next bytes are the next answer
    assert (answer.status, answer.body) == (200, b"ok\n")
    writer.close()


# -- the head limit --------------------------------------------------------------------------


async def test_a_head_over_the_limit_is_431_and_the_connection_closed(
    server: Server, clock: LoopClock
) -> None:
    reader, writer = await server.connect()
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: h\r\nX-Pad: " + b"a" * (2 * MAX_HEAD_BYTES))
    answer = await read_answer(reader)
    assert answer.status == 431
    assert answer.json()["error"] == f"request line and headers exceed {MAX_HEAD_BYTES} bytes"
    assert answer.headers["connection"] == "close"
    await lingered(clock, reader)
    writer.close()
    reader, writer = await server.connect()
    assert await answered(reader, writer)
    writer.close()


def padded_review(uid: str, head_bytes: int) -> bytes:
    """A review whose request line and headers take about ``head_bytes``."""
    body = review_for(uid)
    pad = b"".join(b"X-Pad-%03d: %s\r\n" % (i, b"p" * 1000) for i in range(head_bytes // 1014))
    return (
        b"POST /mutate-pods HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n%s\r\n%s" % (len(body), pad, body)
    )


async def test_a_large_head_under_the_limit_is_answered(server: Server) -> None:
    reader, writer = await server.connect()
    big = padded_review("big-1", MAX_HEAD_BYTES - 2048)
    assert MAX_HEAD_BYTES - 4096 < big.index(b"\r\n\r\n") < MAX_HEAD_BYTES
    writer.write(big)
    answer = await read_answer(reader)
    assert answer.status == 200
    assert answer.json()["response"]["uid"] == "big-1"
    writer.close()


async def test_a_large_head_after_other_requests_in_the_same_write_is_answered(
    server: Server,
) -> None:
    """The head limit counts this request's head, not the bytes of the requests before it
    that arrived in the same read."""
    reader, writer = await server.connect()
    first = [review_for(f"before-{i}") for i in range(3)]
    writer.write(
        b"".join(request_bytes(body) for body in first)
        + padded_review("big-2", MAX_HEAD_BYTES - 2048)
    )
    uids = [(await read_answer(reader)).json()["response"]["uid"] for _ in range(4)]
    assert uids == ["before-0", "before-1", "before-2", "big-2"]
    writer.close()


# -- the body limit and the body budget ------------------------------------------------------


@pytest.mark.parametrize("expect", [b"", b"Expect: 100-continue\r\n"])
async def test_a_content_length_over_the_limit_is_413_before_any_body_byte(
    server: Server, clock: LoopClock, expect: bytes
) -> None:
    reader, writer = await server.connect()
    size = MAX_BODY_BYTES + 1
    writer.write(
        b"POST /mutate-pods HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n%s\r\n" % (size, expect)
    )
    answer = await read_answer(reader)  # no body byte was sent: answered from the head alone
    assert answer.status == 413
    assert answer.json()["error"] == f"body of {size} bytes exceeds {MAX_BODY_BYTES}"
    assert answer.headers["connection"] == "close"
    await lingered(clock, reader)
    writer.close()


def chunked(body: bytes, trailers: bytes = b"", path: bytes = b"/mutate-pods") -> bytes:
    """``body`` POSTed in two chunks, with ``trailers`` after the last."""
    cut = len(body) // 3
    return (
        b"POST %s HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\n%s\r\n"
        % (path, cut, body[:cut], len(body) - cut, body[cut:], trailers)
    )


@pytest.mark.parametrize(
    "trailers",
    [
        b"",
        b"Content-Type: text/plain\r\n",
        b"Content-Encoding: gzip\r\n",
        b"Content-Length: 5\r\nHost: other\r\n",
    ],
)
@pytest.mark.parametrize("path", [b"/mutate-pods", b"/healthz"])
async def test_a_chunked_request_is_411_and_neither_its_chunks_nor_trailers_are_read(
    server: Server, clock: LoopClock, trailers: bytes, path: bytes
) -> None:
    """The API server always sends a Content-Length; a trailer field could otherwise change
    how the body is read (a trailer Content-Encoding or Content-Type) or grow past every
    bound, since llhttp hands trailers to the header callback after the head is counted."""
    reader, writer = await server.connect()
    writer.write(chunked(review_for("chunked-1"), trailers, path) + get("/healthz"))
    answer = await read_answer(reader)
    assert answer.status == 411
    assert answer.json()["error"] == (
        "send the body with a Content-Length; Transfer-Encoding is refused"
    )
    assert answer.headers["connection"] == "close"
    await lingered(clock, reader)  # and nothing after it is answered
    writer.close()
    assert server.http is not None
    assert server.http.buffered == 0


async def test_a_never_ending_trailer_is_refused_before_it_is_read(
    server: Server, clock: LoopClock
) -> None:
    """A trailer field that never ends: answered 411 from the head, then at most the linger
    bound is read and discarded before the connection closes."""
    reader, writer = await server.connect()
    writer.write(chunked(b"{}")[:-2] + b"X-Trailer: ")
    answer = await read_answer(reader)
    assert answer.status == 411
    sent = 0
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while not reader.at_eof() and sent < 64 * 1024 * 1024:
            writer.write(b"a" * 65536)
            await writer.drain()
            sent += 65536
    await lingered(clock, reader)
    assert sent <= QUICK.linger_bytes + 8 * 1024 * 1024  # what the socket buffers held
    writer.close()


async def test_a_body_that_is_moving_holds_its_share_of_the_budget() -> None:
    """While a held body is not stalled, a newcomer that does not fit is refused (503), and a
    small one that fits is answered."""
    async with serving(budget_limits(1.5)) as server:
        stalled = await hold_body(server)
        reader, writer = await server.connect()
        writer.write(request_bytes(b"{}"))
        small = await read_answer(reader)
        assert small.status == 400, small.body
        writer.write(request_bytes())
        refused = await read_answer(reader)
        assert refused.status == 503
        assert refused.json()["error"] == "too many request bodies in flight; retry"
        assert refused.headers["connection"] == "close"
        assert await seconds_until_closed(reader) < LINGER
        writer.close()
        stalled.close()


async def test_a_stalled_body_is_shed_to_make_room_for_a_moving_one() -> None:
    """Once the held body has sent nothing for the stall time, the budget sheds it for the
    newcomer instead of refusing the newcomer."""
    async with serving(budget_limits(1.5)) as server:
        stalled = await hold_body(server)
        assert server.http is not None
        http = server.http
        await until(lambda: all(c.stalled(asyncio.get_running_loop().time()) for c in http.bodies))
        reader, writer = await server.connect()
        assert await answered(reader, writer)
        assert http.refusals.counts == {"stalled-body": 1}
        assert http.buffered == 0
        writer.close()
        stalled.close()


async def test_a_cut_connection_gives_back_its_share_of_the_budget() -> None:
    async with serving(budget_limits(1.5)) as server:
        stalled = await hold_body(server)
        assert server.http is not None
        http = server.http
        stalled.transport.abort()
        await until(lambda: http.buffered == 0)
        reader, writer = await server.connect()
        assert await answered(reader, writer)
        writer.close()


# -- pipelining and flow control -------------------------------------------------------------


async def test_pipelined_requests_in_one_write_are_answered_in_order(server: Server) -> None:
    reader, writer = await server.connect()
    uids = [f"pipelined-{i}" for i in range(40)]
    requests = [request_bytes(review_for(uid)) for uid in uids]
    requests[10:10] = [get("/healthz"), get("/nowhere")]
    writer.write(b"".join(requests))
    answers = [await read_answer(reader) for _ in range(len(requests))]
    assert [(a.status, a.body) for a in answers[10:12]] == [
        (200, b"ok\n"),
        (404, b'{"error":"no endpoint at \'/nowhere\'","status":404}'),
    ]
    del answers[10:12]
    assert [a.json()["response"]["uid"] for a in answers] == uids
    assert await answered(reader, writer)  # and the connection is still open
    writer.close()


def reviews_answered(server: Server) -> float:
    """The server's own count of mutate-pods reviews answered with a patch."""
    assert server.registry is not None
    value = server.registry.get_sample_value(
        "wspin_webhook_requests_total", {"webhook": "mutate-pods", "outcome": "patched"}
    )
    return value or 0.0


async def test_a_client_that_reads_nothing_for_a_while_gets_every_answer_in_order() -> None:
    """Answers pile up until the server stops reading requests; once the client reads, the
    server resumes where it stopped, and the rest are answered in order. The client's small
    receive window keeps the pile small; the probes between the reviews make the server stop
    and resume in the middle of a request's head too."""
    reviews, probes = 500, 100
    requests = []
    for i in range(reviews):
        requests.append(request_bytes(review_for(f"slow-{i}")))
        requests.extend(get(f"/healthz?n={j}") for j in range(probes))
    requests.append(get("/healthz", b"Connection: close\r\n"))
    async with serving(ConnectionLimits(header_timeout=10, body_timeout=10)) as server:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", server.port))
        reader, writer = await asyncio.open_connection(
            sock=sock, ssl=server.trust, server_hostname=SERVICE_HOST
        )
        before = reviews_answered(server)
        writer.write(b"".join(requests))
        # The client reads nothing: the server answers until its answers back up, then stops.
        last, settled = reviews_answered(server), time.monotonic()
        while time.monotonic() - settled < 0.5:
            await asyncio.sleep(0.1)
            if reviews_answered(server) != last:
                last, settled = reviews_answered(server), time.monotonic()
        assert last - before < reviews
        stream = await asyncio.wait_for(reader.read(), 60)  # to the close after the last
        assert reviews_answered(server) - before == reviews
        answers = parse_answers(stream)
        assert len(answers) == len(requests)
        assert all(a.status == 200 for a in answers), {a.status for a in answers}
        uids = [a.json()["response"]["uid"] for a in answers[: -1 : probes + 1]]
        assert uids == [f"slow-{i}" for i in range(reviews)]
        assert {a.body for i, a in enumerate(answers) if i % (probes + 1)} == {b"ok\n"}
        writer.close()


# -- Expect, Connection, HTTP/1.0 ------------------------------------------------------------


async def test_expect_100_continue_is_answered_before_the_body_is_sent(server: Server) -> None:
    reader, writer = await server.connect()
    body = review_for("continue-1")
    writer.write(
        b"POST /mutate-pods HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
        b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    writer.write(body)
    answer = await read_answer(reader)
    assert answer.status == 200
    assert answer.json()["response"]["uid"] == "continue-1"
    writer.close()


async def test_connection_close_is_answered_then_closed(server: Server) -> None:
    reader, writer = await server.connect()
    # The bytes after a request that closes the connection are not a request.
    writer.write(get("/healthz", b"Connection: close\r\n") + get("/healthz"))
    answer = await read_answer(reader)
    assert answer.status == 200
    assert answer.headers["connection"] == "close"
    assert await reader.read() == b""
    writer.close()


async def test_an_upgrade_request_is_answered_with_connection_close_then_closed(
    server: Server,
) -> None:
    reader, writer = await server.connect()
    writer.write(get("/healthz", b"Connection: Upgrade\r\nUpgrade: h2c\r\n") + b"PRI * HTTP/2.0")
    answer = await read_answer(reader)
    assert answer.status == 200
    assert answer.headers["connection"] == "close"
    assert await reader.read() == b""
    writer.close()


async def test_http_1_0_without_keep_alive_is_closed_after_the_answer(
    server: Server, clock: LoopClock
) -> None:
    reader, writer = await server.connect()
    writer.write(get("/healthz", version=b"HTTP/1.0"))
    answer = await read_answer(reader)
    assert answer.status == 200
    assert answer.headers["connection"] == "close"
    await ended(reader)  # the clock stands still: closed after the answer, at once
    writer.close()


async def test_http_1_0_with_keep_alive_stays_open_and_says_so(server: Server) -> None:
    reader, writer = await server.connect()
    for _ in range(3):
        writer.write(get("/healthz", b"Connection: keep-alive\r\n", b"HTTP/1.0"))
        answer = await read_answer(reader)
        assert answer.status == 200
        # An HTTP/1.0 client keeps the connection only when the answer says so.
        assert answer.headers["connection"] == "keep-alive"
    writer.write(get("/healthz", version=b"HTTP/1.0"))
    assert (await read_answer(reader)).headers["connection"] == "close"
    writer.close()


# -- malformed requests ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_line",
    [
        b"BREW /pot HTTP/1.1",
        b"GET /healthz HTTP/7.0",
        b"GET  HTTP/1.1",
        b"GET /health z HTTP/1.1",
        b"\x16\x03\x01\x02\x00",
    ],
)
async def test_a_malformed_request_line_is_400_and_the_server_answers_others(
    server: Server, clock: LoopClock, request_line: bytes
) -> None:
    other_reader, other = await server.connect()
    reader, writer = await server.connect()
    writer.write(get("/healthz") + request_line + b"\r\nHost: h\r\n\r\n")
    assert (await read_answer(reader)).status == 200  # the request before it is answered
    answer = await read_answer(reader)
    assert answer.status == 400
    assert answer.json()["error"].startswith("malformed HTTP request (")
    assert answer.headers["connection"] == "close"
    await lingered(clock, reader)
    writer.close()
    assert await answered(other_reader, other)
    other.close()


@pytest.mark.parametrize(
    "framing",
    [
        b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n",
        b"Content-Length: 2\r\nContent-Length: 3\r\n",
        b"Content-Length: -2\r\n",
        b"Transfer-Encoding: gzip, chunked, identity\r\n",
    ],
)
async def test_a_body_framed_two_ways_is_400_never_a_second_request(
    server: Server, framing: bytes
) -> None:
    """A body whose length could be read two ways would let the bytes after it be taken for a
    request another reader never saw: refused, and nothing after it is answered."""
    reader, writer = await server.connect()
    writer.write(
        b"POST /healthz HTTP/1.1\r\nHost: h\r\n" + framing + b"\r\n0\r\n\r\n" + get("/healthz")
    )
    answer = await read_answer(reader)
    assert answer.status == 400
    assert answer.json()["error"].startswith("malformed HTTP request (")
    assert await reader.read() == b""
    writer.close()
