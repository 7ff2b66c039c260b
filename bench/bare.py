"""The throughput floor: a bare aiohttp HTTPS handler that parses the review with orjson and
answers "allowed". No Python webhook can do less per request, so wspin's reviews/s are
reported as a ratio to this server's, measured the same way in the same run.

``python -m bench.bare PORT CERT KEY``.
"""

from __future__ import annotations

import asyncio
import ssl
import sys

import orjson
from aiohttp import web


async def _handle(request: web.Request) -> web.Response:
    review = orjson.loads(await request.read())
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": True},
    }
    return web.Response(body=orjson.dumps(body), content_type="application/json")


async def _main(port: int, cert: str, key: str) -> None:
    app = web.Application(client_max_size=4 * 1024 * 1024)
    app.router.add_post("/mutate-pods", _handle)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
