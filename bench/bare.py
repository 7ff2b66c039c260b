"""The floors and the other candidate stack, each an HTTPS server on one core.

- ``aiohttp``: a bare aiohttp handler that parses the review with orjson and answers
  "allowed". No aiohttp webhook can do less per request.
- ``httptools``: the same on bare asyncio with httptools (llhttp) and asyncio's own TLS: no
  webhook on that stack can do less per request.
- ``wspin-http``: wspin's own HTTP server (``wspin.http``) answering with the floors'
  endpoint: the cost of wspin's HTTP layer alone, its bounds and TLS included.
- ``aiohttp-server``: wspin's own admission endpoints (``webhook.app.make_app``) served by
  aiohttp's public low-level server (``aiohttp.web.Server``): the stack wspin's HTTP server
  was measured against before it was chosen (``bench.webhook``).

``python -m bench.bare MODE PORT CERT KEY``.
"""

from __future__ import annotations

import asyncio
import ssl
import sys
from typing import Any

import httptools
import orjson
from aiohttp import web


def _allowed(body: bytes) -> bytes:
    review = orjson.loads(body)
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True},
        }
    )


async def _aiohttp(port: int, context: ssl.SSLContext) -> None:
    async def handle(request: web.Request) -> web.Response:
        return web.Response(body=_allowed(await request.read()), content_type="application/json")

    app = web.Application(client_max_size=4 * 1024 * 1024)
    app.router.add_post("/mutate-pods", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
    await asyncio.Event().wait()


class _Floor(asyncio.Protocol):
    """The least an HTTP/1.1 keep-alive server on llhttp does: parse, answer, repeat."""

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.transport: Any = None
        self.body: list[bytes] = []

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, chunk: bytes) -> None:
        self.body.append(chunk)

    def on_message_complete(self) -> None:
        body = _allowed(b"".join(self.body))
        self.body = []
        self.transport.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body)
        )


async def _httptools(port: int, context: ssl.SSLContext) -> None:
    loop = asyncio.get_running_loop()
    await loop.create_server(_Floor, "127.0.0.1", port, ssl=context)
    await asyncio.Event().wait()


async def _aiohttp_server(port: int, context: ssl.SSLContext) -> None:
    from prometheus_client import CollectorRegistry

    from webhook.app import make_app
    from webhook.demo import DEMO_CONFIG
    from webhook.metrics import AdmissionMetrics
    from webhook.server import tune_gc_for_admission
    from webhook.validate import ValidatorConfig
    from wspin.core.logs import setup_logging
    from wspin.http.messages import Request
    from wspin.http.probes import Readiness

    setup_logging("info")  # one JSON line per decision, as wspin writes

    routes = make_app(
        DEMO_CONFIG,
        ValidatorConfig(),
        Readiness(),
        metrics=AdmissionMetrics(CollectorRegistry()),
    )

    async def handle(request: web.BaseRequest) -> web.Response:
        endpoint = routes[request.path]
        reply = endpoint(
            Request(
                request.method,
                request.path,
                request.headers.get("Content-Type", ""),
                request.headers.get("Content-Encoding"),
                await request.read(),
            )
        )
        return web.Response(status=reply.status, body=reply.body, content_type=reply.content_type)

    tune_gc_for_admission()
    server = web.Server(handle, access_log=None)
    loop = asyncio.get_running_loop()
    await loop.create_server(server, "127.0.0.1", port, ssl=context)
    await asyncio.Event().wait()


async def _wspin_http(port: int, context: ssl.SSLContext) -> None:
    from webhook.server import tune_gc_for_admission
    from wspin.http.messages import Reply, Request
    from wspin.http.server import serve

    def handle(request: Request) -> Reply:
        return Reply(200, _allowed(request.body))

    tune_gc_for_admission()
    await serve({"/mutate-pods": handle}, "127.0.0.1", port, ssl_context=context)
    await asyncio.Event().wait()


MODES = {
    "aiohttp": _aiohttp,
    "httptools": _httptools,
    "wspin-http": _wspin_http,
    "aiohttp-server": _aiohttp_server,
}


def main(mode: str, port: int, cert: str, key: str) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    asyncio.run(MODES[mode](port, context))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4])
