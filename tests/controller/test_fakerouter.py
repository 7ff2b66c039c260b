"""The fake relay router answers the contracts the controller calls, and records them."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from tests.controller.fakerouter import STATE, FakeRouterState, RelayHealthLine, make_fake_router

Client = TestClient[web.Request, web.Application]
MINT_KEY = "f" * 43
BEARER = {"Authorization": f"Bearer {MINT_KEY}"}


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    app = make_fake_router(FakeRouterState(mint_key=MINT_KEY))
    async with TestClient(TestServer(app, host="127.0.0.1")) as test_client:
        yield test_client


def state_of(client: Client) -> FakeRouterState:
    assert client.app is not None
    return client.app[STATE]


def mint_body(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "workspaceID": "ws-a",
        "providerSlug": "openai",
        "baseURL": "https://api.openai.com/v1",
        "modelAllowlist": ["gpt-4o"],
        "ttlSeconds": 3600,
        "keyID": "hpke-g2",
    }
    body.update(overrides)
    return body


async def test_healthz_answers_200_with_the_version_header(
    client: Client,
) -> None:
    response = await client.get("/healthz")
    assert response.status == 200
    assert response.headers["X-Llmsafespaces-Version"]
    state_of(client).healthz_status = 503
    assert (await client.get("/healthz")).status == 503


async def test_mint_returns_numbered_tokens_and_records_the_request(
    client: Client,
) -> None:
    first = await client.post("/internal/v1/tokens", json=mint_body(), headers=BEARER)
    second = await client.post("/internal/v1/tokens", json=mint_body(), headers=BEARER)
    assert (await first.json())["token"] == "lrt-fake-1"
    assert (await second.json())["token"] == "lrt-fake-2"
    (recorded, _) = state_of(client).calls("/internal/v1/tokens")
    assert recorded.headers["Authorization"] == f"Bearer {MINT_KEY}"
    assert recorded.body["keyID"] == "hpke-g2"


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "x"}])
async def test_mint_without_the_mint_key_is_rejected_401(
    client: Client, headers: dict[str, str]
) -> None:
    response = await client.post("/internal/v1/tokens", json=mint_body(), headers=headers)
    assert response.status == 401
    assert (await response.json())["error"] == "relay_rejected"


@pytest.mark.parametrize(
    "body", [mint_body(ttlSeconds=0), mint_body(ttlSeconds=8 * 86400), mint_body(keyID="")]
)
async def test_mint_refuses_bad_requests_with_400(client: Client, body: dict[str, object]) -> None:
    response = await client.post("/internal/v1/tokens", json=body, headers=BEARER)
    assert response.status == 400
    assert (await response.json())["reason"] == "bad_request"


async def test_rotate_bumps_the_generation_and_calls_the_hook(
    client: Client,
) -> None:
    published: list[int] = []

    async def publish(state: FakeRouterState) -> None:
        published.append(state.generation)

    state_of(client).on_rotate = publish
    response = await client.post("/internal/v1/keys/rotate", json={}, headers=BEARER)
    receipt = await response.json()
    assert receipt["keyID"] == "hpke-g2" and receipt["generation"] == 2
    assert base64.b64decode(receipt["publicKey"]) == state_of(client).public_key
    assert published == [2]


async def test_metrics_expose_per_relay_health_as_prometheus_text(
    client: Client,
) -> None:
    state = state_of(client)
    state.relays["r-1"] = RelayHealthLine(healthy=True, active_streams=2, egress_bytes=10)
    state.relays["r-2"] = RelayHealthLine(healthy=False, requests_by_status={"200": 5, "429": 1})
    state.fallback_active = True
    text = await (await client.get("/metrics")).text()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("relay_router_relay_healthy", (("relay", "r-1"),))] == 1
    assert samples[("relay_router_relay_healthy", (("relay", "r-2"),))] == 0
    assert samples[("relay_router_active_streams", (("relay", "r-1"),))] == 2
    assert samples[("relay_router_requests_total", (("relay", "r-2"), ("status", "429")))] == 1
    assert samples[("relay_router_fallback_active", ())] == 1
