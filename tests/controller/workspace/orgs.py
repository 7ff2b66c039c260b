"""A fake of the API service's org status endpoint, for the org status tests."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class FakeApiService:
    statuses: dict[str, str] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    tokens: list[str | None] = field(default_factory=list)
    fail: int = 0
    gate: asyncio.Event | None = None
    """Set: every answer waits for it (a test opens it, or never does, to force a timeout)."""
    body: bytes | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        org = request.match_info["org"]
        self.calls.append(org)
        self.tokens.append(request.headers.get("X-Internal-Token"))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            return web.Response(status=self.fail)
        if self.body is not None:
            return web.Response(body=self.body, content_type="application/json")
        if org not in self.statuses:
            return web.Response(status=404)
        return web.json_response({"status": self.statuses[org]})
