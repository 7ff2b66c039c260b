"""How the controller's internal HTTP calls behave: one shot, no redirects, capped reads.

Redirects are never followed: the reference's outage #1611 was the API 301-redirecting its
internal endpoint to https on a plaintext port, which a following client turned into a
five-day silent failure. A 3xx is an error that says where it pointed.
"""

from __future__ import annotations

import aiohttp

from wspin.errors import WspinError


class PooledSession:
    """One ``aiohttp.ClientSession`` for a client's calls, opened on first use so connections
    to the router and the API are reused across workspaces; ``close()`` at shutdown."""

    def __init__(self, timeout_seconds: float) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._session: aiohttp.ClientSession | None = None

    def get(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class InternalCallError(WspinError):
    """An internal HTTP call failed; the message names the status or the transport error and
    never carries a credential."""


async def read_capped(response: aiohttp.ClientResponse, limit: int, what: str) -> bytes:
    """The whole body, or ``InternalCallError`` as soon as it exceeds ``limit`` bytes.

    A loop, not one ``read(limit + 1)``: a stream read returns what has arrived so far, so a
    single read cuts any answer longer than one network chunk."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await response.content.read(limit + 1 - size):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise InternalCallError(f"{what}: the answer exceeds {limit} bytes")
    return b"".join(chunks)


def trimmed(body: bytes, limit: int = 4096) -> str:
    """At most ``limit`` bytes of an error body, decoded leniently, for a message."""
    return body[:limit].decode(errors="replace").strip()


def redirect_error(what: str, response: aiohttp.ClientResponse) -> InternalCallError:
    location = response.headers.get("Location", "") or "?"
    return InternalCallError(
        f"{what}: redirected (HTTP {response.status} to {location}); internal calls do not "
        "follow redirects"
    )
