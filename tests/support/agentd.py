"""A stub agentd: its two admin endpoints on loopback, answering what a test scripts.

Each scripted agent listens on its own loopback address (``127.0.0.1``, ``127.0.0.2``, …) on
the one port the controller is configured with, as pods do on their IPs; ``bind_all`` serves
every loopback address from one socket instead (a fleet of thousands). ``/v1/healthz`` is open,
``/v1/statusz`` answers 401 unless the request carries ``Bearer <token>`` of that agent, as
agentd's admin mux does. Scripts: healthy, unhealthy, a missing provider, disk pressure, busy
sessions, a body that is not a report, hanging until the client gives up, and refusing
connections (``refuse``: nothing listens on that address any more).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from wspin.core.objects import Obj


def healthy_health(**extra: Any) -> Obj:
    return {"healthy": True, "version": "1.4.0", "uptime_seconds": 600, "warnings": [], **extra}


def healthy_status(**extra: Any) -> Obj:
    report: Obj = {
        "healthy": True,
        "ready": True,
        "connected": ["anthropic"],
        "providers_configured": 1,
        "sessions": [],
        "sessions_active": 0,
        "agent_version": "1.4.0",
        "uptime_seconds": 600,
        "warnings": [],
        "disk": {"used_bytes": 2 * 1024**3, "total_bytes": 10 * 1024**3},
        "memory": {"used_bytes": 256 * 1024**2, "total_bytes": 2 * 1024**3},
        "cpu": {"usage_micros": 1_500_000, "limit_micros_per_sec": 2_000_000},
        "context": {"used_tokens": 0, "total_tokens": 200_000},
        "memory_pressure": False,
    }
    report.update(extra)
    return report


def busy(*sessions: tuple[str, int]) -> Obj:
    """A deep status with these busy sessions (id, context used)."""
    listed = [
        {"id": ident, "title": f"task {ident}", "status": "busy", "contextUsed": used}
        for ident, used in sessions
    ]
    return healthy_status(sessions=listed, sessions_active=len(listed))


@dataclass
class Agent:
    """One pod's agentd, as scripted."""

    ip: str
    token: str = ""
    """The admin bearer statusz demands ("" = open, as agentd without a token)."""
    health: Obj = field(default_factory=healthy_health)
    health_code: int = 200
    health_raw: bytes | None = None
    status: Obj = field(default_factory=healthy_status)
    status_code: int = 200
    hang: bool = False
    """Both endpoints accept and never answer (the client's timeout ends the request)."""
    seen: list[tuple[str, str]] = field(default_factory=list)
    """(path, Authorization header) of every request."""

    def requests(self, path: str) -> int:
        return sum(1 for seen_path, _ in self.seen if seen_path == path)


class StubAgentd:
    """The agents of a test, on one port."""

    def __init__(self, *, bind_all: bool = False) -> None:
        self.bind_all = bind_all
        self.port = 0
        self.agents: dict[str, Agent] = {}
        self.in_flight = 0
        self.most_in_flight = 0
        self.served = 0
        self.arrivals: list[float] = []
        """Loop time of every request's arrival."""
        self.latency = 0.0
        """Seconds each answer takes (an agentd answers in milliseconds; requests overlap)."""
        self._runner: web.AppRunner | None = None
        self._sites: dict[str, web.TCPSite] = {}
        self._released = asyncio.Event()

    async def __aenter__(self) -> StubAgentd:
        app = web.Application()
        app.router.add_get("/v1/healthz", self._healthz)
        app.router.add_get("/v1/statusz", self._statusz)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        # A free port on 127.0.0.1 (every agent address uses the same port, as pods do).
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        if self.bind_all:
            await self._listen("0.0.0.0")  # noqa: S104 - loopback addresses only reach it here
        return self

    async def __aexit__(self, *_: object) -> None:
        self._released.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _listen(self, host: str) -> None:
        assert self._runner is not None
        site = web.TCPSite(self._runner, host, self.port, reuse_address=True)
        await site.start()
        self._sites[host] = site

    async def agent(self, ip: str = "127.0.0.1", **script: Any) -> Agent:
        """Script (and start listening for) the agent at ``ip``."""
        agent = Agent(ip, **script)
        self.agents[ip] = agent
        if not self.bind_all and ip not in self._sites:
            await self._listen(ip)
        return agent

    async def refuse(self, ip: str = "127.0.0.1") -> None:
        """Stop listening at ``ip``: connections to it are refused."""
        site = self._sites.pop(ip)
        await site.stop()

    async def _answer(self, request: web.Request, statusz: bool) -> web.Response:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        agent = self.agents.get(sockname[0] if sockname else "")
        if agent is None or not (request.remote or "").startswith("127."):
            raise web.HTTPNotFound()
        auth = request.headers.get("Authorization", "")
        agent.seen.append((request.path, auth))
        self.served += 1
        self.arrivals.append(asyncio.get_running_loop().time())
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if agent.hang:
                await self._released.wait()
            if self.latency:
                await asyncio.sleep(self.latency)
            if statusz:
                if agent.token and auth != f"Bearer {agent.token}":
                    return web.Response(
                        status=401, headers={"WWW-Authenticate": 'Bearer realm="agentd"'}
                    )
                return web.json_response(agent.status, status=agent.status_code)
            if agent.health_raw is not None:
                return web.Response(body=agent.health_raw, status=agent.health_code)
            return web.json_response(agent.health, status=agent.health_code)
        finally:
            self.in_flight -= 1

    async def _healthz(self, request: web.Request) -> web.Response:
        return await self._answer(request, statusz=False)

    async def _statusz(self, request: web.Request) -> web.Response:
        return await self._answer(request, statusz=True)


@contextlib.asynccontextmanager
async def stub_agentd(*, bind_all: bool = False) -> Any:
    async with StubAgentd(bind_all=bind_all) as stub:
        yield stub


def dumps(report: Obj) -> bytes:
    return json.dumps(report).encode()
