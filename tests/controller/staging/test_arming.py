"""Relay staging arming: off means untouched, on means armed within the window or exit 85."""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import logging
import re
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web

from controller.runtime.manager import Manager
from controller.settings import ControllerSettings
from controller.setup import new_manager
from controller.staging.arming import (
    ARMED_MESSAGE,
    ARMING_STARTUP_GUARD_WINDOW,
    CREDENTIAL_PROBE_WORKSPACE,
    REFUSED_MESSAGE,
    RELAY_STAGING_NOT_ARMED_EXIT_CODE,
    RelayStagingConfig,
    RelayStagingError,
    relay_staging_exit_code_for,
    setup_relay_staging,
)
from controller.staging.secrets import MINT_KEY_SECRET, RelaySecrets, secret_value
from tests.controller.conftest import (
    INTERNAL_TOKEN,
    CredentialSource,
    FakeRouter,
    pub_payload,
    publish_pub,
)
from tests.kubeapi import KubeServer
from wspin.core import contract
from wspin.core.kinds import SECRETS
from wspin.core.logs import JSONFormatter
from wspin.kube.client import Kube

DAY = 86400.0


def manager_of(kube: Kube) -> Manager:
    """Only ``kube`` exists on it: arming must not reach for caches or anything else."""
    stub: Any = SimpleNamespace(kube=kube)
    return stub  # type: ignore[no-any-return]


async def arm(
    kube: Kube | None,
    *,
    router_url: str = "http://router.invalid",
    namespace: str = "llm-relay",
    token_ttl: float = DAY,
    api_service_url: str = "http://api.invalid",
    token: str = INTERNAL_TOKEN,
    enabled: bool = True,
    window: float = ARMING_STARTUP_GUARD_WINDOW,
) -> RelayStagingConfig | None:
    return await setup_relay_staging(
        manager_of(kube) if kube is not None else None,
        enabled=enabled,
        router_url=router_url,
        namespace=namespace,
        token_ttl=token_ttl,
        api_service_url=api_service_url,
        api_internal_token=token,
        window=window,
    )


# -- constants and the exit mapping --------------------------------------------------------


def test_not_armed_exit_code_is_85_and_distinct_from_the_in_pod_codes() -> None:
    assert RELAY_STAGING_NOT_ARMED_EXIT_CODE == 85
    in_pod = {
        contract.EXIT_AGENTD_MISMATCH,
        contract.EXIT_AGENTD_MISSING,
        contract.EXIT_OPENCODE_MISMATCH,
        contract.EXIT_OPENCODE_MISSING,
    }
    assert in_pod == {81, 82, 83, 84}
    assert RELAY_STAGING_NOT_ARMED_EXIT_CODE not in in_pod


def test_the_startup_guard_window_is_30_seconds_and_the_default_deadline() -> None:
    assert ARMING_STARTUP_GUARD_WINDOW == 30
    default = inspect.signature(setup_relay_staging).parameters["window"].default
    assert default is ARMING_STARTUP_GUARD_WINDOW


@pytest.mark.parametrize(
    "error",
    [RelayStagingError("ttl"), ValueError("construction"), RuntimeError("guard client")],
)
def test_any_arming_error_maps_to_85_and_none_to_0(error: Exception) -> None:
    assert relay_staging_exit_code_for(None) == 0
    assert relay_staging_exit_code_for(error) == 85


# -- flag off -------------------------------------------------------------------------------


async def test_flag_off_returns_none_without_touching_the_manager() -> None:
    class Untouchable:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"arming touched manager.{name} with the flag off")

    manager: Any = Untouchable()
    config = await setup_relay_staging(
        manager,
        enabled=False,
        router_url="",
        namespace="",
        token_ttl=-1,
        api_service_url="",
        api_internal_token="",
    )
    assert config is None


async def test_flag_off_never_calls_the_api(kube: Kube, kube_server: KubeServer) -> None:
    kube_server.writes.clear()
    assert await arm(kube, enabled=False) is None
    assert kube_server.writes == []


# -- flag validation, in order ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"token_ttl": 0}, "--relay-token-ttl must be within 1s..7d, got 0s"),
        ({"token_ttl": 8 * DAY}, "--relay-token-ttl must be within 1s..7d, got 192h0m0s"),
        ({"token_ttl": 0.5}, "--relay-token-ttl must be within 1s..7d, got 500ms"),
        ({"router_url": ""}, "--llm-relay-router-url is required"),
        ({"api_service_url": ""}, "--api-service-url is required"),
        ({"namespace": ""}, "--llm-relay-namespace is required"),
        # the TTL is checked first, then router URL, API URL, namespace
        ({"token_ttl": 0, "router_url": "", "namespace": ""}, "--relay-token-ttl"),
        ({"router_url": "", "api_service_url": ""}, "--llm-relay-router-url"),
        ({"api_service_url": "", "namespace": ""}, "--api-service-url"),
    ],
)
async def test_invalid_flags_fail_in_the_stated_order_before_any_api_call(
    overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(RelayStagingError) as caught:
        await arm(None, **overrides)
    assert str(caught.value).startswith(message)
    assert relay_staging_exit_code_for(caught.value) == 85


async def test_the_ttl_bounds_themselves_are_accepted(
    kube: Kube, namespace: str, router: FakeRouter, credentials: CredentialSource
) -> None:
    await publish_pub(kube, namespace)
    for ttl in (1.0, 7 * DAY):
        config = await arm(
            kube,
            router_url=router.url,
            namespace=namespace,
            token_ttl=ttl,
            api_service_url=credentials.url,
        )
        assert config is not None and config.token_ttl == ttl


# -- armed ----------------------------------------------------------------------------------


async def test_a_healthy_router_and_published_key_arm_and_log_the_enabled_line(
    kube: Kube,
    namespace: str,
    router: FakeRouter,
    credentials: CredentialSource,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    await publish_pub(kube, namespace)
    config = await arm(
        kube,
        router_url=router.url,
        namespace=namespace,
        token_ttl=3600,
        api_service_url=credentials.url + "/",
    )
    assert config == RelayStagingConfig(
        router_url=router.url,
        namespace=namespace,
        token_ttl=3600,
        api_service_url=credentials.url,
        internal_token=INTERNAL_TOKEN,
    )
    assert relay_staging_exit_code_for(None) == 0
    armed = [r for r in caplog.records if r.getMessage() == ARMED_MESSAGE]
    assert len(armed) == 1 and armed[0].name == "controller"
    line = json.loads(JSONFormatter().format(armed[0]))
    assert line["msg"] == "relay-only key delivery enabled"
    assert (line["routerURL"], line["namespace"], line["tokenTTL"]) == (
        router.url,
        namespace,
        "1h0m0s",
    )
    assert len(router.state.calls("/healthz")) == 1
    # the mint key now exists with 43 lowercase hex characters
    mint = await kube.get(SECRETS, MINT_KEY_SECRET, namespace)
    value = secret_value(mint, "mint-key")
    assert value is not None and re.fullmatch(rb"[0-9a-f]{43}", value)
    # the internal token went to the API, and nowhere else
    assert credentials.requests[0].headers["X-Internal-Token"] == INTERNAL_TOKEN
    assert INTERNAL_TOKEN not in repr(config)
    assert all(INTERNAL_TOKEN not in JSONFormatter().format(r) for r in caplog.records)


async def test_the_credential_probe_asks_for_the_sentinel_workspace(
    kube: Kube, namespace: str, router: FakeRouter, credentials: CredentialSource
) -> None:
    await publish_pub(kube, namespace)
    await arm(kube, router_url=router.url, namespace=namespace, api_service_url=credentials.url)
    (request,) = credentials.requests
    assert request.path == f"/api/v1/internal/workspaces/{CREDENTIAL_PROBE_WORKSPACE}/llm-providers"
    assert request.query["ownerUserID"] == CREDENTIAL_PROBE_WORKSPACE


async def test_an_existing_mint_key_is_adopted_not_replaced(
    kube: Kube, namespace: str, router: FakeRouter, credentials: CredentialSource
) -> None:
    await publish_pub(kube, namespace)
    existing = base64.b64encode(b"a" * 43).decode()
    await kube.create(
        SECRETS, {"metadata": {"name": MINT_KEY_SECRET}, "data": {"mint-key": existing}}, namespace
    )
    await arm(kube, router_url=router.url, namespace=namespace, api_service_url=credentials.url)
    mint = await kube.get(SECRETS, MINT_KEY_SECRET, namespace)
    assert mint["data"]["mint-key"] == existing


@pytest.mark.parametrize("status", [200, 404, 400, 500])
async def test_any_non_redirect_non_auth_answer_counts_as_a_reachable_credential_source(
    kube: Kube, namespace: str, router: FakeRouter, credentials: CredentialSource, status: int
) -> None:
    await publish_pub(kube, namespace)
    credentials.status = status
    config = await arm(
        kube, router_url=router.url, namespace=namespace, api_service_url=credentials.url
    )
    assert config is not None


# -- the guard's failures: each exits 85 with its reason -------------------------------------


async def refused(**kwargs: Any) -> str:
    with pytest.raises(RelayStagingError) as caught:
        await arm(**kwargs)
    assert relay_staging_exit_code_for(caught.value) == 85
    text = str(caught.value)
    assert INTERNAL_TOKEN not in text
    return text


async def test_an_unreachable_router_fails_fast_within_the_window(
    kube: Kube, namespace: str, credentials: CredentialSource
) -> None:
    await publish_pub(kube, namespace)
    async with asyncio.timeout(ARMING_STARTUP_GUARD_WINDOW + 5):  # a hang guard only
        text = await refused(
            kube=kube,
            router_url="http://127.0.0.1:1",
            namespace=namespace,
            api_service_url=credentials.url,
        )
    assert "refusing to start" in text
    assert "not reachable at http://127.0.0.1:1/healthz (--llm-relay-router-url)" in text


async def test_a_router_healthz_that_is_not_200_fails(
    kube: Kube, namespace: str, router: FakeRouter, credentials: CredentialSource
) -> None:
    await publish_pub(kube, namespace)
    router.state.healthz_status = 503
    text = await refused(
        kube=kube, router_url=router.url, namespace=namespace, api_service_url=credentials.url
    )
    assert f"llm-relay router healthz returned 503 (URL {router.url}/healthz)" in text


async def test_a_namespace_without_the_public_key_names_the_secret(
    kube: Kube, namespace: str, router: FakeRouter, credentials: CredentialSource
) -> None:
    text = await refused(
        kube=kube, router_url=router.url, namespace=namespace, api_service_url=credentials.url
    )
    assert "llm-relay-hpke-pub not found" in text
    assert "cluster-scoped" not in text


async def test_a_missing_namespace_shows_as_the_public_key_read_failing(
    kube: Kube, router: FakeRouter, credentials: CredentialSource
) -> None:
    text = await refused(
        kube=kube,
        router_url=router.url,
        namespace="no-such-relay-namespace",
        api_service_url=credentials.url,
    )
    assert "llm-relay-hpke-pub" in text
    assert "cluster-scoped" not in text


@pytest.mark.parametrize(
    "payload",
    [
        "not-json",
        json.dumps({"publicKey": base64.b64encode(b"k").decode(), "generation": 0}),
        json.dumps({"publicKey": "", "generation": 1}),
        json.dumps({"generation": 1}),
        json.dumps({"publicKey": base64.b64encode(b"k").decode(), "generation": "1"}),
        json.dumps(["publicKey", 1]),
    ],
)
async def test_a_shape_invalid_public_key_fails(
    kube: Kube, namespace: str, router: FakeRouter, credentials: CredentialSource, payload: str
) -> None:
    await publish_pub(kube, namespace, payload)
    text = await refused(
        kube=kube, router_url=router.url, namespace=namespace, api_service_url=credentials.url
    )
    assert "llm-relay-hpke-pub payload is shape-invalid" in text


async def test_a_forbidden_public_key_read_fails_with_the_api_error(
    kube: Kube,
    namespace: str,
    router: FakeRouter,
    credentials: CredentialSource,
    kube_server: KubeServer,
) -> None:
    await publish_pub(kube, namespace)
    kube_server.fail_next(403, method="GET", path=f"/api/v1/namespaces/{namespace}/secrets")
    text = await refused(
        kube=kube, router_url=router.url, namespace=namespace, api_service_url=credentials.url
    )
    assert "reading llm-relay-hpke-pub" in text


async def test_a_mint_key_that_cannot_be_created_fails(
    kube: Kube,
    namespace: str,
    router: FakeRouter,
    credentials: CredentialSource,
    kube_server: KubeServer,
) -> None:
    await publish_pub(kube, namespace)
    kube_server.fail_next(403, method="POST", path=f"/api/v1/namespaces/{namespace}/secrets")
    text = await refused(
        kube=kube, router_url=router.url, namespace=namespace, api_service_url=credentials.url
    )
    assert "ensuring the mint key" in text


async def test_an_empty_existing_mint_key_fails(
    kube: Kube, namespace: str, router: FakeRouter, credentials: CredentialSource
) -> None:
    await publish_pub(kube, namespace)
    await kube.create(
        SECRETS, {"metadata": {"name": MINT_KEY_SECRET}, "data": {"mint-key": ""}}, namespace
    )
    text = await refused(
        kube=kube, router_url=router.url, namespace=namespace, api_service_url=credentials.url
    )
    assert "ensuring the mint key" in text and "is empty" in text


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (301, "credential source redirected (HTTP 301 to "),
        (302, "credential source redirected (HTTP 302 to "),
        (308, "credential source redirected (HTTP 308 to "),
        (401, "credential source rejected the internal token (HTTP 401)"),
        (403, "credential source refused the request (HTTP 403"),
    ],
)
async def test_a_redirecting_or_refusing_credential_source_fails_saying_which(
    kube: Kube,
    namespace: str,
    router: FakeRouter,
    credentials: CredentialSource,
    status: int,
    reason: str,
) -> None:
    await publish_pub(kube, namespace)
    credentials.status = status
    credentials.location = f"{credentials.url}/moved"
    text = await refused(
        kube=kube, router_url=router.url, namespace=namespace, api_service_url=credentials.url
    )
    assert reason in text
    assert credentials.redirect_target_hits == 0, "redirects must not be followed"


async def test_an_unreachable_credential_source_fails(
    kube: Kube, namespace: str, router: FakeRouter
) -> None:
    await publish_pub(kube, namespace)
    text = await refused(
        kube=kube, router_url=router.url, namespace=namespace, api_service_url="http://127.0.0.1:1"
    )
    assert "credential source not reachable at http://127.0.0.1:1" in text


async def test_an_internal_token_with_a_trailing_newline_fails_naming_the_variable(
    kube: Kube, namespace: str, router: FakeRouter, credentials: CredentialSource
) -> None:
    # A token mounted from a file often ends in a newline; no HTTP client sends that as a
    # header, and "credential source not reachable" would send the operator the wrong way.
    await publish_pub(kube, namespace)
    text = await refused(
        kube=kube,
        router_url=router.url,
        namespace=namespace,
        api_service_url=credentials.url,
        token=INTERNAL_TOKEN + "\n",
    )
    assert "LLMSAFESPACES_INTERNAL_TOKEN contains a control character" in text
    assert "not reachable" not in text
    assert credentials.requests == []


@pytest.fixture
async def hanging_api() -> AsyncIterator[str]:
    """A Kubernetes API that accepts requests and never answers."""
    never = asyncio.Event()

    async def hang(_: web.Request) -> web.Response:
        await never.wait()
        return web.Response()

    app = web.Application()
    app.router.add_route("*", "/{path:.*}", hang)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield f"http://{host}:{port}"
    finally:
        never.set()
        await runner.cleanup()


async def test_a_guard_that_outlasts_the_window_fails(
    hanging_api: str, router: FakeRouter, credentials: CredentialSource
) -> None:
    from kubernetes_asyncio.client import ApiClient, Configuration

    configuration = Configuration()
    configuration.host = hanging_api
    async with ApiClient(configuration) as api:
        text = await refused(
            kube=Kube(api),
            router_url=router.url,
            api_service_url=credentials.url,
            window=0.3,
        )
    assert "did not finish within 300ms" in text


async def test_the_guard_client_comes_from_the_injectable_factory(
    kube: Kube, namespace: str, router: FakeRouter, credentials: CredentialSource
) -> None:
    await publish_pub(kube, namespace)
    built: list[RelaySecrets] = []

    def factory() -> RelaySecrets:
        built.append(RelaySecrets(kube, namespace))
        return built[-1]

    config = await setup_relay_staging(
        None,
        enabled=True,
        router_url=router.url,
        namespace=namespace,
        token_ttl=DAY,
        api_service_url=credentials.url,
        api_internal_token=INTERNAL_TOKEN,
        guard_client_factory=factory,
    )
    assert config is not None and len(built) == 1


async def test_a_failing_guard_client_factory_is_not_armed() -> None:
    def broken() -> RelaySecrets:
        raise RuntimeError("no REST config")

    with pytest.raises(RelayStagingError, match="building the startup-guard client: no REST"):
        await setup_relay_staging(
            None,
            enabled=True,
            router_url="http://r",
            namespace="llm-relay",
            token_ttl=DAY,
            api_service_url="http://a",
            api_internal_token="",
            guard_client_factory=broken,
        )


async def test_arming_through_a_real_manager_uses_its_api_client(
    kube: Kube, namespace: str, router: FakeRouter, credentials: CredentialSource
) -> None:
    await publish_pub(kube, namespace, pub_payload(generation=7))
    manager = new_manager(kube, ControllerSettings())
    config = await setup_relay_staging(
        manager,
        enabled=True,
        router_url=router.url,
        namespace=namespace,
        token_ttl=DAY,
        api_service_url=credentials.url,
        api_internal_token=INTERNAL_TOKEN,
    )
    assert config is not None
    assert await kube.get(SECRETS, MINT_KEY_SECRET, namespace)


# -- source pins: the arming order and the exit path, checked in the source text ---------


def test_the_armed_line_is_logged_inside_arming_after_the_guard() -> None:
    source = inspect.getsource(setup_relay_staging)
    guard = source.index("await run_startup_guard(")
    armed = source.index("ARMED_MESSAGE")
    assert guard < armed
    assert ARMED_MESSAGE == "relay-only key delivery enabled"


def test_the_refusal_exits_through_the_mapping_and_never_with_a_bare_1() -> None:
    import controller.cli

    source = inspect.getsource(controller.cli.serve)
    refusal = source.index("log.error(REFUSED_MESSAGE")
    mapping = source.index("return relay_staging_exit_code_for(err)", refusal)
    assert mapping - refusal < 400
    assert "return 1" not in source[refusal:mapping]
    assert REFUSED_MESSAGE == "relay-only key delivery: refusing to start (not armed)"
