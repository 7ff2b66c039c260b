"""The bytes of an answer: status line, the four headers every answer carries, the body."""

from __future__ import annotations

import time
from email.utils import formatdate
from typing import Final

import httptools

from wspin.http.messages import Reply

REASONS: Final = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    417: "Expectation Failed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}

CLOSE: Final = b"Connection: close\r\n"
KEEP_ALIVE: Final = b"Connection: keep-alive\r\n"
CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"


class _Date:
    """The ``Date`` header, formatted once per second."""

    second = -1
    header = b""

    @classmethod
    def now(cls) -> bytes:
        second = int(time.time())
        if second != cls.second:
            cls.second = second
            cls.header = b"Date: " + formatdate(second, usegmt=True).encode() + b"\r\n"
        return cls.header


_STARTS: dict[tuple[int, str], bytes] = {}
"""The status line and Content-Type of each (status, content type) the endpoints answer with,
encoded once: both come from code, never from a request, so there are a handful."""


def encode(reply: Reply, connection: bytes, with_body: bool = True) -> bytes:
    """``reply`` as HTTP/1.1; ``connection`` is its Connection header line, or empty. An answer
    to HEAD has no body (its Content-Length still says how long the body is), or the client
    would read the body as the start of the next answer."""
    body = reply.body
    key = (reply.status, reply.content_type)
    start = _STARTS.get(key)
    if start is None:
        start = _STARTS[key] = b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: " % (
            reply.status,
            REASONS.get(reply.status, "Unknown").encode(),
            reply.content_type.encode(),
        )
    head = b"%s%d\r\n%s%s\r\n" % (start, len(body), _Date.now(), connection)
    return head + body if with_body else head


def parser_problem(err: httptools.HttpParserError) -> str:
    """llhttp's reason (fixed text such as "Invalid header value char"), never the bytes."""
    text = str(err)
    return text.split(":", 1)[-1].strip()[:80] if text else type(err).__name__
