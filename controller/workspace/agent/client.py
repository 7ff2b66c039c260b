"""HTTP to agentd's admin port in workspace pods: one GET, bounded in time and size.

The agent scheduler is the only caller (one scraper of agentd for the whole process). Each
request opens its own connection and closes it after the answer: a fleet has one address per
pod, so a keep-alive pool would only hold idle sockets, and a pod's IP may belong to another
pod by the next scrape. No redirect is followed, no proxy from the environment is used, and
compressed bodies are not inflated (agentd never compresses; a compressed answer is just
unreadable). The admin bearer goes only to the endpoint that needs it (statusz) and never
into an error message.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

import aiohttp

from controller.toolkit.bodies import BodyTooLarge, read_capped

HEALTH_PATH: Final = "/v1/healthz"
STATUS_PATH: Final = "/v1/statusz"


class Unanswered(Exception):
    """No answer: refused, reset, unreachable, or past the timeout (the message says which,
    in a few words)."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    too_large: bool = False
    """The body exceeded the cap (``body`` is then empty)."""


def describe(err: BaseException, timeout: float) -> str:
    """A short, token-free account of a failed request."""
    if isinstance(err, TimeoutError | asyncio.TimeoutError):
        return f"no answer within {timeout:g} s"
    if isinstance(err, aiohttp.ClientConnectorError):
        reason = err.os_error.strerror if err.os_error and err.os_error.strerror else ""
        return f"connection failed: {reason.lower() or type(err.os_error).__name__}"
    if isinstance(err, aiohttp.ServerDisconnectedError):
        return "the connection closed before an answer"
    if isinstance(err, aiohttp.ClientPayloadError):
        return "the answer was cut short"
    return type(err).__name__


class AgentClient:
    """GETs to ``http://<pod IP>:<port><path>``; one session per process, opened on first use."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # limit=0: the scheduler's own bound decides how many requests run at once.
            connector = aiohttp.TCPConnector(limit=0, force_close=True)
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, trust_env=False
            )
        return self._session

    async def get(
        self, ip: str, path: str, *, seconds: float, cap: int, bearer: str | None = None
    ) -> Answer:
        """The answer (status and body) within ``seconds``, or ``Unanswered``."""
        host = f"[{ip}]" if ":" in ip else ip
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        try:
            async with asyncio.timeout(seconds):
                async with self._http().get(
                    f"http://{host}:{self.port}{path}",
                    headers=headers,
                    allow_redirects=False,
                    timeout=aiohttp.ClientTimeout(total=None),
                ) as response:
                    try:
                        body = await read_capped(response, cap)
                    except BodyTooLarge:
                        return Answer(response.status, b"", too_large=True)
                    return Answer(response.status, body)
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as err:
            raise Unanswered(describe(err, seconds)) from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
