"""Arming relay-only key delivery: the one decision, at start, whether staging may run.

"Armed" is a conjunction and nothing else: the flags are valid, the config is built, and the
startup guard passed within ``ARMING_STARTUP_GUARD_WINDOW``; only then is the line
``relay-only key delivery enabled`` logged. Any failure on the way raises
``RelayStagingError`` and ``relay_staging_exit_code_for`` maps it to exit 85: a controller
deployed relay-only that cannot stage must crash loudly at boot instead of running green
while every workspace silently gets no credentials.

The guard, in order: the router answers ``/healthz``; the router has published its public key
(``llm-relay-hpke-pub``, shape-valid); the mint key exists (created if not); and one probe of the
credential source with redirects not followed (an internal endpoint redirected to https on a
plaintext port would otherwise leave every workspace unstaged while the controller looks armed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final
from urllib.parse import quote

import aiohttp

from controller.durations import format_duration
from controller.settings import INTERNAL_TOKEN_ENV
from controller.staging.secrets import (
    HPKE_PUB_SECRET,
    RelaySecretError,
    RelaySecrets,
    ensure_mint_key,
    parse_hpke_pub,
)
from wspin.core import contract
from wspin.core.errors import KubeAPIError, WspinError
from wspin.core.logs import fields
from wspin.kube.client import Kube

if TYPE_CHECKING:
    from controller.runtime.manager import Manager

log = logging.getLogger("controller")

ARMING_STARTUP_GUARD_WINDOW: Final = 30.0
"""Seconds within which an enabled controller must reach the armed state; the guard's deadline
is built from this constant. Fixed by design, not a flag."""

RELAY_STAGING_NOT_ARMED_EXIT_CODE: Final = contract.RELAY_STAGING_NOT_ARMED_EXIT_CODE
"""85: "deployed relay-only but not armed". The next rung after the in-pod verifier codes
81/82 (agentd) and 83/84 (opencode): one code, one meaning, so a CrashLoopBackOff with it is
one ``kubectl describe pod`` away from its reason, and the armed log line's absence confirms it."""

MIN_TOKEN_TTL: Final = 1.0
MAX_TOKEN_TTL: Final = 7 * 24 * 3600.0
ROUTER_PROBE_TIMEOUT: Final = 5.0
"""The router's ``/healthz`` gets one try with this timeout; no retry (the pod restart is it)."""
CREDENTIAL_PROBE_TIMEOUT: Final = 5.0
CREDENTIAL_PROBE_WORKSPACE: Final = "wspin-arming-probe"
"""A workspace name no real workspace has; the API answers it without side effects."""
ARMED_MESSAGE: Final = "relay-only key delivery enabled"
REFUSED_MESSAGE: Final = "relay-only key delivery: refusing to start (not armed)"

GuardClientFactory = Callable[[], RelaySecrets]


class RelayStagingError(WspinError):
    """Relay staging is enabled but cannot be armed; the controller exits 85."""


@dataclass(frozen=True)
class RelayStagingConfig:
    """What the per-workspace staging pass needs once armed. The internal token stays out of
    the repr so the config can be logged or shown in a traceback safely."""

    router_url: str
    """The BYO resolve router's base URL (mint, rotate, workspace traffic)."""
    namespace: str
    """Relay namespace: envelopes, the public key and the mint key live there."""
    token_ttl: float
    """Seconds a minted token lives (1 s..7 d)."""
    api_service_url: str
    """Root of the in-cluster API, the credential source (trailing slashes trimmed)."""
    internal_token: str = field(repr=False)
    """``X-Internal-Token`` for the credential source; never logged."""

    def providers_url(
        self, workspace: str, owner_user_id: str, *, uid: str = "", namespace: str = ""
    ) -> str:
        """The credential source's internal endpoint for one workspace: the owner admission
        verified, and the Workspace's uid and namespace, so the source can tell a Workspace
        from another of the same name."""
        query = f"ownerUserID={quote(owner_user_id, safe='')}"
        if uid:
            query += f"&workspaceUID={quote(uid, safe='')}"
        if namespace:
            query += f"&namespace={quote(namespace, safe='')}"
        return (
            f"{self.api_service_url}/api/v1/internal/workspaces/{quote(workspace, safe='')}"
            f"/llm-providers?{query}"
        )


def relay_staging_exit_code_for(error: BaseException | None) -> int:
    """The controller's exit code for an arming outcome: none → 0, any error → 85.

    Any error at all, not only ``RelayStagingError``: a failure at any rung means "not armed",
    and this path never exits 1."""
    return 0 if error is None else RELAY_STAGING_NOT_ARMED_EXIT_CODE


def validate_flags(
    *, router_url: str, namespace: str, token_ttl: float, api_service_url: str
) -> None:
    """The flag checks, in order; the internal token is deliberately not checked here (the
    credential probe reports a missing or wrong one)."""
    if not MIN_TOKEN_TTL <= token_ttl <= MAX_TOKEN_TTL:
        raise RelayStagingError(
            f"--relay-token-ttl must be within 1s..7d, got {format_duration(token_ttl)}",
            "set --relay-token-ttl (WSPIN_RELAY_TOKEN_TTL) to e.g. 24h",
        )
    if not router_url:
        raise RelayStagingError(
            "--llm-relay-router-url is required when --relay-only-key-delivery is on",
            "set --llm-relay-router-url to the relay router's base URL",
        )
    if not api_service_url:
        raise RelayStagingError(
            "--api-service-url is required when --relay-only-key-delivery is on "
            "(provider credentials are fetched from the API's internal endpoint)",
            "set --api-service-url to the in-cluster API root URL",
        )
    if not namespace:
        raise RelayStagingError(
            "--llm-relay-namespace is required when --relay-only-key-delivery is on",
            "set --llm-relay-namespace (default llm-relay)",
        )


async def setup_relay_staging(
    manager: Manager | None,
    *,
    enabled: bool,
    router_url: str,
    namespace: str,
    token_ttl: float,
    api_service_url: str,
    api_internal_token: str,
    guard_client_factory: GuardClientFactory | None = None,
    window: float = ARMING_STARTUP_GUARD_WINDOW,
) -> RelayStagingConfig | None:
    """Arm relay staging, or raise ``RelayStagingError`` (exit 85 via
    ``relay_staging_exit_code_for``). Off → None before touching anything.

    The guard talks to the API through a direct client (``guard_client_factory``, by default
    one over the manager's API client): the manager's caches are not running yet, and the
    relay namespace is outside what they watch.
    """
    if not enabled:
        return None
    validate_flags(
        router_url=router_url,
        namespace=namespace,
        token_ttl=token_ttl,
        api_service_url=api_service_url,
    )
    config = RelayStagingConfig(
        router_url=router_url,
        namespace=namespace,
        token_ttl=token_ttl,
        api_service_url=api_service_url.rstrip("/"),
        internal_token=api_internal_token,
    )
    try:
        if guard_client_factory is not None:
            secrets = guard_client_factory()
        elif manager is not None:
            secrets = RelaySecrets(Kube(manager.kube.api), namespace)
        else:
            raise RelayStagingError("no manager to build a Kubernetes client from")
    except Exception as err:
        raise RelayStagingError(f"building the startup-guard client: {err}") from err
    try:
        async with asyncio.timeout(window):
            await run_startup_guard(config, secrets)
    except TimeoutError:
        raise RelayStagingError(
            f"startup guard did not finish within {format_duration(window)}; refusing to start",
            "check that the relay router, the API and the Kubernetes API answer promptly",
        ) from None
    except RelayStagingError as err:
        raise RelayStagingError(
            f"startup guard failed, refusing to start: {err.message}",
            err.fix
            or "fix the router, namespace or RBAC configuration, "
            "or turn --relay-only-key-delivery off",
        ) from err
    log.info(
        ARMED_MESSAGE,
        extra=fields(
            routerURL=config.router_url,
            namespace=config.namespace,
            tokenTTL=format_duration(config.token_ttl),
        ),
    )
    return config


async def run_startup_guard(config: RelayStagingConfig, secrets: RelaySecrets) -> None:
    """The four checks, in order; the first failure raises ``RelayStagingError``. Logs
    nothing itself: the caller's armed or refusal line is the observable outcome."""
    if not config.router_url or not config.namespace:
        raise RelayStagingError("relay-only: the router URL and the namespace are required")
    timeout = aiohttp.ClientTimeout(total=ROUTER_PROBE_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        await probe_router(session, config.router_url)
        await check_public_key(secrets, config.namespace)
        try:
            await ensure_mint_key(secrets, secrets)
        except (RelaySecretError, KubeAPIError) as err:
            raise RelayStagingError(f"relay-only: ensuring the mint key: {err}") from err
        await probe_credential_source(session, config)


async def probe_router(session: aiohttp.ClientSession, router_url: str) -> None:
    """One ``GET <router>/healthz``, no redirects followed; anything but 200 fails."""
    url = router_url + "/healthz"
    try:
        async with session.get(url, allow_redirects=False) as response:
            status = response.status
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as err:
        raise RelayStagingError(
            f"relay-only: llm-relay router not reachable at {url} (--llm-relay-router-url): "
            f"{err or type(err).__name__}",
            "check --llm-relay-router-url and that the router is running",
        ) from err
    if status != 200:
        raise RelayStagingError(
            f"relay-only: llm-relay router healthz returned {status} (URL {url})",
            "check --llm-relay-router-url and the router's logs",
        )


async def check_public_key(secrets: RelaySecrets, namespace: str) -> None:
    """The router has bootstrapped: its public-key Secret exists and is shape-valid.

    No Namespace read: namespace-scoped RBAC cannot get Namespaces, so a missing namespace
    shows up as this read failing."""
    try:
        secret = await secrets.get(HPKE_PUB_SECRET)
    except KubeAPIError as err:
        raise RelayStagingError(f"relay-only: reading {HPKE_PUB_SECRET}: {err}") from err
    if secret is None:
        raise RelayStagingError(
            f"relay-only: Secret {HPKE_PUB_SECRET} not found in namespace {namespace}: the "
            "router has not published its public key yet, or the controller may not read it",
            f"check the router in {namespace} and the controller's get permission on "
            f"{HPKE_PUB_SECRET}",
        )
    try:
        parse_hpke_pub(secret)
    except RelaySecretError as err:
        raise RelayStagingError(
            f"relay-only: {HPKE_PUB_SECRET} payload is shape-invalid at startup: {err.message}"
        ) from err


async def probe_credential_source(
    session: aiohttp.ClientSession, config: RelayStagingConfig
) -> None:
    """One GET of the credential source for a sentinel workspace, redirects not followed.

    Transport error, 3xx, 401 and 403 fail arming, each with its own reason; any other answer
    (200, 404, 400, 500) shows the endpoint is there and accepts our token."""
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in config.internal_token):
        # No HTTP client sends a header with one (aiohttp refuses: header injection), and the
        # transport error below would blame the network.
        raise RelayStagingError(
            f"relay-only: {INTERNAL_TOKEN_ENV} contains a control character (a trailing "
            "newline from the file it was made from?) and cannot be sent as a header",
            f"set {INTERNAL_TOKEN_ENV} to the token without surrounding whitespace",
        )
    url = config.providers_url(CREDENTIAL_PROBE_WORKSPACE, CREDENTIAL_PROBE_WORKSPACE)
    headers = {"X-Internal-Token": config.internal_token}
    timeout = aiohttp.ClientTimeout(total=CREDENTIAL_PROBE_TIMEOUT)
    try:
        async with session.get(
            url, headers=headers, allow_redirects=False, timeout=timeout
        ) as response:
            status, location = response.status, response.headers.get("Location", "")
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as err:
        raise RelayStagingError(
            f"relay-only: credential source not reachable at {config.api_service_url}: "
            f"{err or type(err).__name__}",
            "check --api-service-url and that the API is running",
        ) from err
    if 300 <= status <= 399:
        raise RelayStagingError(
            f"relay-only: credential source redirected (HTTP {status} to {location or '?'}); "
            "internal calls do not follow redirects",
            "point --api-service-url at the URL the API serves its internal endpoint on",
        )
    if status == 401:
        raise RelayStagingError(
            "relay-only: credential source rejected the internal token (HTTP 401)",
            "set LLMSAFESPACES_INTERNAL_TOKEN to the same value the API uses",
        )
    if status == 403:
        raise RelayStagingError(
            "relay-only: credential source refused the request (HTTP 403: the API has no "
            "internal token configured, or none was sent)",
            "set LLMSAFESPACES_INTERNAL_TOKEN on both the API and the controller",
        )
