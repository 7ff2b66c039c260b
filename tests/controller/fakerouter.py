"""A fake relay router for the tests: an aiohttp app on loopback speaking the router
contracts the controller calls.

- ``GET /healthz``: 200 with ``X-Llmsafespaces-Version`` (``state.healthz_status`` overrides).
- ``POST /internal/v1/tokens``: Bearer must equal the mint key (``state.mint_key``, or any
  non-empty bearer when None); ``ttlSeconds`` in (0, 7 d]; answers ``{"token": "lrt-fake-N"}``.
- ``POST /internal/v1/keys/rotate``: bumps the generation, makes a real X25519 keypair for
  it and answers the receipt ``{keyID, generation, publicKey}``; ``state.on_rotate`` lets a
  test publish the new key.
- ``state.new_keypair()`` / ``state.open(envelope)``: the router's private side, so tests
  prove an envelope the controller sealed opens to the original key.
- ``GET /metrics``: Prometheus text with the per-relay health series the InferenceRelay
  controller scrapes (``state.relays``), or ``state.metrics_text`` verbatim.

Every request is recorded in ``state.requests`` so tests assert what was sent. Rejections
use the router's JSON shape ``{"error": "relay_rejected", "reason", "detail"}``.
"""

from __future__ import annotations

import base64
import hmac
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from controller.staging.envelopes import new_keypair, open_envelope, split
from tests import stub_http as serving

VERSION = "fake-0"
MAX_TTL_SECONDS = 7 * 24 * 3600


@dataclass
class RelayHealthLine:
    """One relay as the router reports it on ``/metrics``."""

    healthy: bool = True
    active_streams: int = 0
    requests_by_status: dict[str, int] = field(default_factory=dict)
    egress_bytes: int = 0


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeRouterState:
    """What the fake answers, and what it was asked. Mutate it between requests."""

    healthz_status: int = 200
    mint_key: str | None = None
    """Expected Bearer for the internal API; None accepts any non-empty bearer."""
    generation: int = 1
    public_key: bytes = b"fake-public-key-generation-1"
    mint_status: int = 200
    """Non-200 makes every mint fail with that status (a rejection body)."""
    mint_detail: str = "configured failure"
    """The ``detail`` of that rejection body."""
    private_keys: dict[int, bytes] = field(default_factory=dict)
    """Generation → X25519 private key, for the keypairs made by ``new_keypair``."""
    rotate_status: int = 200
    rotate_detail: str = "configured failure"
    on_rotate: Callable[[FakeRouterState], Awaitable[None]] | None = None
    """Called after the generation is bumped, before the receipt is returned."""
    relays: dict[str, RelayHealthLine] = field(default_factory=dict)
    fallback_active: bool = False
    metrics_status: int = 200
    metrics_text: str | None = None
    """When set, served verbatim instead of the text built from ``relays``."""
    minted: int = 0
    requests: list[RecordedRequest] = field(default_factory=list)

    def calls(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    def new_keypair(self) -> bytes:
        """A real keypair for the current generation; returns (and serves) its public key."""
        private, self.public_key = new_keypair()
        self.private_keys[self.generation] = private
        return self.public_key

    def open(self, envelope: str) -> bytes:
        """Open an envelope with the private key of the generation its keyID names."""
        _, key_id, _ = split(envelope)
        generation = int(key_id.removeprefix("hpke-g"))
        return open_envelope(self.private_keys[generation], envelope)


STATE = web.AppKey("fake_router_state", FakeRouterState)


def _reject(status: int, reason: str, detail: str = "") -> web.Response:
    body = {"error": "relay_rejected", "reason": reason, "detail": detail}
    return web.json_response(body, status=status)


async def _record(request: web.Request) -> RecordedRequest:
    raw = await request.read()
    try:
        body: Any = json.loads(raw) if raw else None
    except ValueError:
        body = raw.decode(errors="replace")
    recorded = RecordedRequest(request.method, request.path, dict(request.headers), body)
    request.app[STATE].requests.append(recorded)
    return recorded


def _authorized(state: FakeRouterState, recorded: RecordedRequest) -> bool:
    header = recorded.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme != "Bearer" or not token:
        return False
    if state.mint_key is None:
        return True
    return hmac.compare_digest(token.encode(), state.mint_key.encode())


async def healthz(request: web.Request) -> web.Response:
    await _record(request)
    status = request.app[STATE].healthz_status
    return web.Response(status=status, text="ok\n", headers={"X-Llmsafespaces-Version": VERSION})


async def mint(request: web.Request) -> web.Response:
    state = request.app[STATE]
    recorded = await _record(request)
    if not _authorized(state, recorded):
        return _reject(401, "unauthorized", "missing or wrong bearer")
    if state.mint_status != 200:
        return _reject(state.mint_status, "mint_failed", state.mint_detail)
    body = recorded.body if isinstance(recorded.body, dict) else {}
    ttl = body.get("ttlSeconds")
    if not isinstance(ttl, int) or not 0 < ttl <= MAX_TTL_SECONDS:
        return _reject(400, "bad_request", "ttlSeconds must be within (0, 7 days]")
    for required in ("workspaceID", "providerSlug", "keyID"):
        if not body.get(required):
            return _reject(400, "bad_request", f"{required} is required")
    state.minted += 1
    return web.json_response({"token": f"lrt-fake-{state.minted}"})


async def rotate(request: web.Request) -> web.Response:
    state = request.app[STATE]
    recorded = await _record(request)
    if not _authorized(state, recorded):
        return _reject(401, "unauthorized", "missing or wrong bearer")
    if state.rotate_status != 200:
        return _reject(state.rotate_status, "rotate_failed", state.rotate_detail)
    state.generation += 1
    state.new_keypair()
    if state.on_rotate is not None:
        await state.on_rotate(state)
    return web.json_response(
        {
            "keyID": f"hpke-g{state.generation}",
            "generation": state.generation,
            "publicKey": base64.b64encode(state.public_key).decode(),
        }
    )


def metrics_text(state: FakeRouterState) -> str:
    """The router's exposition for ``state.relays`` (names as the real router's)."""
    lines = [
        "# TYPE relay_router_relay_healthy gauge",
        *(
            f'relay_router_relay_healthy{{relay="{rid}"}} {int(r.healthy)}'
            for rid, r in state.relays.items()
        ),
        "# TYPE relay_router_active_streams gauge",
        *(
            f'relay_router_active_streams{{relay="{rid}"}} {r.active_streams}'
            for rid, r in state.relays.items()
        ),
        "# TYPE relay_router_requests_total counter",
        *(
            f'relay_router_requests_total{{relay="{rid}",status="{code}"}} {count}'
            for rid, r in state.relays.items()
            for code, count in r.requests_by_status.items()
        ),
        "# TYPE relay_router_relay_egress_bytes gauge",
        *(
            f'relay_router_relay_egress_bytes{{relay="{rid}"}} {r.egress_bytes}'
            for rid, r in state.relays.items()
        ),
        "# TYPE relay_router_fallback_active gauge",
        f"relay_router_fallback_active {int(state.fallback_active)}",
    ]
    return "\n".join(lines) + "\n"


async def metrics(request: web.Request) -> web.Response:
    state = request.app[STATE]
    await _record(request)
    text = state.metrics_text if state.metrics_text is not None else metrics_text(state)
    return web.Response(
        status=state.metrics_status, text=text, content_type="text/plain", charset="utf-8"
    )


def make_fake_router(state: FakeRouterState | None = None) -> web.Application:
    """The fake router app; ``app[STATE]`` is the state it serves from."""
    app = web.Application()
    app[STATE] = state or FakeRouterState()
    app.router.add_get("/healthz", healthz)
    app.router.add_post("/internal/v1/tokens", mint)
    app.router.add_post("/internal/v1/keys/rotate", rotate)
    app.router.add_get("/metrics", metrics)
    return app


async def start_fake_router(
    state: FakeRouterState | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> tuple[web.AppRunner, str]:
    """Serve the fake on ``host:port`` (0 = a free port); returns the runner and base URL."""
    runner, bound = await serving.start(make_fake_router(state), host, port)
    return runner, f"http://{host}:{bound}"
