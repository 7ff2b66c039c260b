"""Reading an HTTP answer's body under a size cap: every client of a service the controller
does not control (agentd in a tenant's pod, the relay router, the API) reads this way."""

from __future__ import annotations

import aiohttp


class BodyTooLarge(Exception):
    """The answer's body exceeds the cap (reading stopped at ``limit + 1`` bytes)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer exceeds {limit} bytes")
        self.limit = limit


async def read_capped(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body, or ``BodyTooLarge`` as soon as it exceeds ``limit`` bytes (a
    Content-Length above it is refused before anything is read).

    A loop, not one ``read(limit + 1)``: a stream read returns what has arrived so far, so a
    single read cuts any answer longer than one network chunk."""
    if response.content_length is not None and response.content_length > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    while chunk := await response.content.read(limit + 1 - size):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
    return b"".join(chunks)
