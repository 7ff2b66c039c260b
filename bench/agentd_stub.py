"""A stub agentd for the agent scheduler benchmark, in a process of its own (so its CPU is
not counted as the controller's): ``python -m bench.agentd_stub`` serves ``/v1/healthz`` and
``/v1/statusz`` on every loopback address at one port, prints the port, and runs until
killed. statusz demands the bearer of the pod whose address was called (``agent_fleet``)."""

from __future__ import annotations

import asyncio
import json
import socket

from aiohttp import web
from aiohttp.typedefs import Handler

from tests.support.agentd import healthy_health, healthy_status

HEALTH = json.dumps(healthy_health()).encode()
STATUS = json.dumps(healthy_status()).encode()


def _index(ip: str) -> int:
    _, _, third, fourth = (int(part) for part in ip.split("."))
    return third * 250 + fourth - 1


@web.middleware
async def _loopback_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not (request.remote or "").startswith("127."):
        raise web.HTTPForbidden()
    return await handler(request)


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(body=HEALTH, content_type="application/json")


async def _statusz(request: web.Request) -> web.Response:
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    expected = f"Bearer token-{_index(sockname[0])}" if sockname else ""
    if request.headers.get("Authorization") != expected:
        return web.Response(status=401)
    return web.Response(body=STATUS, content_type="application/json")


async def main() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = web.Application(middlewares=[_loopback_only])
    app.router.add_get("/v1/healthz", _healthz)
    app.router.add_get("/v1/statusz", _statusz)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    # Every 127.x address at once (one per pod); anything else is refused by the middleware.
    await web.TCPSite(runner, "0.0.0.0", port, backlog=4096).start()  # noqa: S104
    print(port, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
