"""aiohttp applications as stand-ins for the HTTP services the processes call (the relay
router, agentd, the org-status API): a test double at the HTTP boundary, served with aiohttp's
public runner. wspin's own ports run ``wspin.http.server``."""

from __future__ import annotations

from aiohttp import web


async def start(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on host:port (0 = any free port); returns the runner and the bound port."""
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    bound = next(int(address[1]) for address in runner.addresses if len(address) >= 2)
    return runner, bound
