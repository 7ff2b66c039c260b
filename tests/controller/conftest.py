"""Fixtures for the controller CLI and relay staging tests: the fake relay router, a fake
credential source (the API's internal endpoint), and helpers to publish the router's
public-key Secret (the kubeconfig for controller subprocesses is ``tests/conftest.py``'s)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from tests import stub_http as serving
from tests.controller.fakerouter import FakeRouterState, start_fake_router
from wspin.core.kinds import SECRETS
from wspin.kube.client import Kube

INTERNAL_TOKEN = "internal-token-do-not-log-7f3a"


@dataclass
class FakeRouter:
    url: str
    state: FakeRouterState


@pytest.fixture
async def router() -> AsyncIterator[FakeRouter]:
    state = FakeRouterState()
    runner, url = await start_fake_router(state)
    try:
        yield FakeRouter(url, state)
    finally:
        await runner.cleanup()


@dataclass
class CredentialSource:
    """The API's internal providers endpoint: answers ``status`` and records requests."""

    url: str = ""
    status: int = 200
    location: str = ""
    requests: list[web.Request] = field(default_factory=list)
    redirect_target_hits: int = 0


@pytest.fixture
async def credentials() -> AsyncIterator[CredentialSource]:
    source = CredentialSource()

    async def providers(request: web.Request) -> web.Response:
        source.requests.append(request)
        if 300 <= source.status <= 399:
            return web.Response(
                status=source.status, headers={"Location": source.location or "/moved"}
            )
        if source.status == 200:
            return web.json_response({"providers": []})
        return web.json_response({"error": "no"}, status=source.status)

    async def moved(_: web.Request) -> web.Response:
        source.redirect_target_hits += 1
        return web.json_response({"providers": []})

    app = web.Application()
    app.router.add_get("/api/v1/internal/workspaces/{workspace}/llm-providers", providers)
    app.router.add_get("/moved", moved)
    runner, port = await serving.start(app, "127.0.0.1", 0)
    source.url = f"http://127.0.0.1:{port}"
    try:
        yield source
    finally:
        await runner.cleanup()


def pub_secret(payload: bytes | str) -> dict[str, object]:
    raw = payload.encode() if isinstance(payload, str) else payload
    return {
        "metadata": {"name": "llm-relay-hpke-pub"},
        "data": {"payload": base64.b64encode(raw).decode()},
    }


def pub_payload(generation: int = 2, key: bytes = b"dummy-x25519-public-key") -> str:
    return json.dumps({"publicKey": base64.b64encode(key).decode(), "generation": generation})


async def publish_pub(kube: Kube, namespace: str, payload: bytes | str | None = None) -> None:
    await kube.create(SECRETS, pub_secret(payload or pub_payload()), namespace)
