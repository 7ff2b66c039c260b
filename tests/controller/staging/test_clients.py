"""The credential source and router clients over real HTTP on loopback: what they send, the
cache, redirects, errors that name the status and never a credential."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from controller.staging.arming import RelayStagingConfig
from controller.staging.clients import (
    CredentialSource,
    InternalCallError,
    MintRequest,
    RouterClient,
    parse_providers,
)
from tests import stub_http as serving
from tests.controller.conftest import INTERNAL_TOKEN, FakeRouter
from tests.controller.staging.conftest import OPENAI_KEY, Providers, make_config, provider
from tests.support.clock import FakeClock


class Clients:
    """Makes the clients a test uses and closes them (pooled connections and all) afterwards."""

    def __init__(self) -> None:
        self.made: list[CredentialSource | RouterClient] = []

    def source(self, config: RelayStagingConfig, **kwargs: Any) -> CredentialSource:
        made = CredentialSource(config, **kwargs)
        self.made.append(made)
        return made

    def source_for(
        self, providers: Providers, clock: Callable[[], float] | None = None
    ) -> CredentialSource:
        config = make_config("http://router.invalid", "llm-relay", providers.url, 3600)
        return self.source(config, clock=clock or FakeClock().monotonic)

    def router(self, url: str) -> RouterClient:
        made = RouterClient(url)
        self.made.append(made)
        return made


@pytest.fixture
async def clients() -> AsyncIterator[Clients]:
    made = Clients()
    yield made
    for client in made.made:
        await client.session.close()


class TestCredentialSource:
    async def test_it_sends_the_path_owner_and_internal_token(
        self, providers: Providers, clients: Clients
    ) -> None:
        providers.bound["ws a+1"] = [
            provider("openai", "openai", OPENAI_KEY, models=("gpt-4o",), base_url="https://x/v1")
        ]
        (credential,) = await clients.source_for(providers).providers("ws a+1", "user&1")
        assert providers.requests == [("ws a+1", "user&1", INTERNAL_TOKEN)]
        assert (credential.slug, credential.kind, credential.base_url) == (
            "openai",
            "openai",
            "https://x/v1",
        )
        assert credential.api_key == OPENAI_KEY and credential.models == ("gpt-4o",)

    async def test_a_second_call_within_the_ttl_is_served_from_the_cache(
        self, providers: Providers, clients: Clients
    ) -> None:
        clock = FakeClock()
        source = clients.source_for(providers, clock.monotonic)
        await source.providers("ws-a", "u")
        clock.advance(59)
        await source.providers("ws-a", "u")
        assert len(providers.requests) == 1
        clock.advance(2)
        await source.providers("ws-a", "u")
        assert len(providers.requests) == 2

    async def test_failures_are_not_cached_and_nothing_stale_is_served(
        self, providers: Providers, clients: Clients
    ) -> None:
        clock = FakeClock()
        source = clients.source_for(providers, clock.monotonic)
        await source.providers("ws-a", "u")
        providers.status = 500
        clock.advance(61)
        with pytest.raises(InternalCallError, match="api returned status 500"):
            await source.providers("ws-a", "u")
        with pytest.raises(InternalCallError, match="api returned status 500"):
            await source.providers("ws-b", "u")
        assert len(providers.requests) == 3

    async def test_a_large_answer_is_read_whole(
        self, providers: Providers, clients: Clients
    ) -> None:
        """Far beyond one network read, well within the 4 MiB cap."""
        models = tuple(f"model-{i:05d}-{'x' * 40}" for i in range(40_000))
        providers.bound["ws-a"] = [provider("openai", "openai", OPENAI_KEY, models=models)]
        (credential,) = await clients.source_for(providers).providers("ws-a", "u")
        assert credential.models == models

    async def test_an_answer_over_four_mib_is_refused(
        self, providers: Providers, clients: Clients
    ) -> None:
        models = tuple(f"model-{i:06d}-{'x' * 60}" for i in range(60_000))
        providers.bound["ws-a"] = [provider("openai", "openai", OPENAI_KEY, models=models)]
        with pytest.raises(InternalCallError, match="exceeds 4194304 bytes"):
            await clients.source_for(providers).providers("ws-a", "u")

    async def test_a_dead_api_is_a_call_error(self, clients: Clients) -> None:
        config = make_config("http://router.invalid", "llm-relay", "http://127.0.0.1:9", 3600)
        with pytest.raises(InternalCallError, match="call api"):
            await clients.source(config).providers("ws-a", "u")

    async def test_a_redirect_is_an_error_and_not_followed(
        self, redirecting: Redirecting, clients: Clients
    ) -> None:
        config = make_config("http://router.invalid", "llm-relay", redirecting.url, 3600)
        with pytest.raises(InternalCallError, match=r"redirected \(HTTP 301"):
            await clients.source(config).providers("ws-a", "u")
        assert redirecting.target_hits == 0

    async def test_an_internal_token_never_shows_in_an_error(
        self, providers: Providers, clients: Clients
    ) -> None:
        config = make_config("http://router.invalid", "llm-relay", providers.url, 3600)
        wrong = clients.source(
            type(config)(
                config.router_url, config.namespace, 3600, config.api_service_url, "wrong-token"
            )
        )
        with pytest.raises(InternalCallError) as caught:
            await wrong.providers("ws-a", "u")
        assert "401" in str(caught.value) and "wrong-token" not in str(caught.value)
        assert "wrong-token" not in repr(wrong.config)

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            (b"<html>", "not JSON"),
            (b'{"items": []}', 'no "providers" list'),
            (b'{"providers": [{"kind": "openai", "slug": "o"}]}', r"providers\[0\]\.apiKey"),
            (
                b'{"providers": [{"kind": "openai", "slug": "o", "apiKey": "sk-1", '
                b'"models": [1]}]}',
                r"providers\[0\]\.models\[0\]\.id",
            ),
            (
                b'{"providers": [{"kind": "openai", "slug": "o", "apiKey": "sk-1", "models": 7}]}',
                r"providers\[0\]\.models must be a list",
            ),
        ],
    )
    def test_a_malformed_answer_names_the_field_not_the_value(
        self, body: bytes, message: str
    ) -> None:
        with pytest.raises(InternalCallError, match=message) as caught:
            parse_providers(body)
        assert "sk-1" not in str(caught.value)


def mint_request() -> MintRequest:
    return MintRequest(
        workspaceID="ws-a",
        providerSlug="openai",
        baseURL="https://api.openai.com/v1",
        modelAllowlist=["gpt-4o"],
        ttlSeconds=3600,
        keyID="hpke-g2",
    )


class TestRouterClient:
    async def test_mint_sends_the_bearer_and_scope_and_returns_the_token(
        self, router: FakeRouter, clients: Clients
    ) -> None:
        router.state.mint_key = "m" * 43
        token = await clients.router(router.url + "/").mint(mint_request(), "m" * 43)
        assert token == "lrt-fake-1"
        (call,) = router.state.calls("/internal/v1/tokens")
        assert call.headers["Authorization"] == "Bearer " + "m" * 43
        assert call.body["keyID"] == "hpke-g2" and call.body["ttlSeconds"] == 3600

    async def test_a_rejection_names_the_status_and_the_reason(
        self, router: FakeRouter, clients: Clients
    ) -> None:
        router.state.mint_key = "m" * 43
        with pytest.raises(InternalCallError, match=r"router returned status 401: .*unauthorized"):
            await clients.router(router.url).mint(mint_request(), "wrong")

    async def test_an_empty_mint_key_is_refused_before_calling(
        self, router: FakeRouter, clients: Clients
    ) -> None:
        with pytest.raises(InternalCallError, match="mint key is empty"):
            await clients.router(router.url).mint(mint_request(), "")
        assert router.state.requests == []

    async def test_an_empty_model_allowlist_is_refused_before_calling(
        self, router: FakeRouter, clients: Clients
    ) -> None:
        """The router reads an empty allowlist as every model: no such token is ever asked."""
        unscoped = mint_request() | {"modelAllowlist": []}
        with pytest.raises(InternalCallError, match="empty model allowlist"):
            await clients.router(router.url).mint(unscoped, "k")
        assert router.state.requests == [] and router.state.minted == 0

    async def test_rotate_parses_the_receipt(self, router: FakeRouter, clients: Clients) -> None:
        receipt = await clients.router(router.url).rotate("any")
        assert (receipt.key_id, receipt.generation) == ("hpke-g2", 2)
        assert receipt.public_key == router.state.public_key and len(receipt.public_key) == 32

    async def test_a_dead_router_is_a_call_error(self, clients: Clients) -> None:
        with pytest.raises(InternalCallError, match="token mint: call failed"):
            await clients.router("http://127.0.0.1:9").mint(mint_request(), "k")


@dataclass
class Redirecting:
    url: str = ""
    target_hits: int = 0
    paths: list[str] = field(default_factory=list)


@pytest.fixture
async def redirecting() -> AsyncIterator[Redirecting]:
    state = Redirecting()

    async def moved(request: web.Request) -> web.Response:
        state.paths.append(request.path)
        return web.Response(status=301, headers={"Location": "/elsewhere"})

    async def target(_: web.Request) -> web.Response:
        state.target_hits += 1
        return web.json_response({"providers": []})

    app = web.Application()
    app.router.add_get("/api/v1/internal/workspaces/{ws}/llm-providers", moved)
    app.router.add_get("/elsewhere", target)
    runner, port = await serving.start(app, "127.0.0.1", 0)
    state.url = f"http://127.0.0.1:{port}"
    try:
        yield state
    finally:
        await runner.cleanup()
