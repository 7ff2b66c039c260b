"""What an endpoint sees and returns: one whole request in, one reply out.

Endpoints are plain functions (``Endpoint``): the server (``wspin.http.server``) frames,
bounds and times out requests, routes by path only (the query string is ignored, so the API
server's ``?timeout=10s`` is), and answers each request synchronously in the event loop, so
there is no task, request object of the HTTP library or middleware chain per request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import orjson


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__, a
# measurable cost for objects built once per review.
@dataclass(slots=True)
class Request:
    """One whole HTTP request, as an endpoint sees it."""

    method: str
    path: str
    content_type: str
    """The Content-Type header as sent ("" when absent)."""
    content_encoding: str | None
    body: bytes
    quiet: bool = False
    """Set when the connection is over its log budget: answer, count, but log nothing."""


@dataclass(slots=True)
class Reply:
    status: int
    body: bytes
    content_type: str = "application/json"


Endpoint = Callable[[Request], Reply]
Routes = Mapping[str, Endpoint]
"""Path → endpoint."""

TEXT = "text/plain; charset=utf-8"


def error_reply(status: int, reason: str) -> Reply:
    """A refusal at the HTTP level: ``{"error": reason, "status": status}``."""
    return Reply(status, orjson.dumps({"error": reason, "status": status}))


def text_reply(status: int, text: str) -> Reply:
    return Reply(status, text.encode(), TEXT)
