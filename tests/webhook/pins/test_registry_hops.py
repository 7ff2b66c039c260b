"""What the registry client sends and follows: Accept, challenges, redirects, size caps.

distribution 2.8 (the real registry of the other suites) never redirects a manifest read nor
offers two challenges, so these cases run against small aiohttp servers on loopback that
answer the way blob-storage-backed registries, CDNs and mirrors do.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web

from webhook.reference import ImageReference
from webhook.registry import (
    MANIFEST_ACCEPT,
    MAX_MANIFEST_BYTES,
    MAX_REDIRECTS,
    RegistryError,
    fetch_manifest,
)

INDEX = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [],
        "annotations": {"dev.llmsafespaces/agentd.sha256-amd64": "a" * 64},
    }
).encode()
DIGEST = "sha256:" + hashlib.sha256(INDEX).hexdigest()
TOKEN = "anonymous-pull-token-0123"
PRESIGNED = "X-Amz-Credential=AKIA%2Fsecret-credential&X-Amz-Signature=ab%2Fcd%3D"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Server:
    """One loopback HTTP server; ``seen`` records each request's path, query and headers."""

    port: int = 0
    seen: list[dict[str, str]] = field(default_factory=list)

    def authority(self, host: str = "127.0.0.1") -> str:
        return f"{host}:{self.port}"


@pytest.fixture
async def start() -> AsyncIterator[Callable[[Handler], Awaitable[Server]]]:
    runners: list[web.AppRunner] = []

    async def start_server(handler: Handler) -> Server:
        server = Server()

        async def record(request: web.Request) -> web.StreamResponse:
            server.seen.append(
                {
                    "path": request.path,
                    "query": request.url.raw_query_string,
                    "accept": request.headers.get("Accept", ""),
                    "authorization": request.headers.get("Authorization", ""),
                }
            )
            return await handler(request)

        app = web.Application()
        app.router.add_get("/{tail:.*}", record)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        runners.append(runner)
        server.port = runner.addresses[0][1]
        return server

    yield start_server
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


def _ref(authority: str) -> ImageReference:
    return ImageReference.parse(f"{authority}/wspin/release:v1@{DIGEST}")


async def _serve_index(_: web.Request) -> web.Response:
    return web.Response(body=INDEX, content_type="application/vnd.oci.image.index.v1+json")


async def _json(value: object) -> web.Response:
    return web.json_response(value)


def _redirect_to(location: Callable[[], str]) -> Handler:
    async def handler(_: web.Request) -> web.Response:
        return web.Response(status=307, headers={"Location": location()})

    return handler


async def test_a_read_sent_to_blob_storage_keeps_its_presigned_query_and_loses_the_token(
    start: Callable[[Handler], Awaitable[Server]], session: aiohttp.ClientSession
) -> None:
    storage = await start(_serve_index)
    registry = Server()

    async def registry_handler(request: web.Request) -> web.Response:
        if request.path == "/token":
            return web.json_response({"token": TOKEN})
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            response = web.Response(status=401)
            # Basic first: the Bearer challenge must still be found.
            response.headers.add("WWW-Authenticate", 'Basic realm="registry"')
            response.headers.add(
                "WWW-Authenticate",
                f'Bearer realm="http://127.0.0.1:{registry.port}/token",service="hub"',
            )
            return response
        location = f"http://{storage.authority()}/blobs/index?{PRESIGNED}"
        return web.Response(status=307, headers={"Location": location})

    registry = await start(registry_handler)
    manifest = await fetch_manifest(_ref(registry.authority()), session=session)

    assert manifest["annotations"] == {"dev.llmsafespaces/agentd.sha256-amd64": "a" * 64}
    reads = [r for r in registry.seen if r["path"].startswith("/v2/")]
    assert [r["accept"] for r in reads] == [MANIFEST_ACCEPT, MANIFEST_ACCEPT]
    assert reads[-1]["authorization"] == f"Bearer {TOKEN}"
    assert storage.seen == [
        {"path": "/blobs/index", "query": PRESIGNED, "accept": MANIFEST_ACCEPT, "authorization": ""}
    ]


async def test_a_bearer_challenge_after_basic_in_the_same_header_is_answered(
    start: Callable[[Handler], Awaitable[Server]], session: aiohttp.ClientSession
) -> None:
    registry = Server()

    async def handler(request: web.Request) -> web.Response:
        if request.path == "/token":
            return web.json_response({"access_token": TOKEN})
        if request.headers.get("Authorization") == f"Bearer {TOKEN}":
            return await _serve_index(request)
        realm = f"http://127.0.0.1:{registry.port}/token"
        challenge = f'Basic realm="decoy", Bearer realm="{realm}",service="hub"'
        return web.Response(status=401, headers={"WWW-Authenticate": challenge})

    registry = await start(handler)
    manifest = await fetch_manifest(_ref(registry.authority()), session=session)
    assert manifest["schemaVersion"] == 2
    token_request = next(r for r in registry.seen if r["path"] == "/token")
    assert token_request["query"] == "scope=repository:wspin/release:pull&service=hub"


@pytest.mark.parametrize("trusted", [False, True])
async def test_a_redirect_to_plain_http_needs_a_loopback_or_trusted_host(
    start: Callable[[Handler], Awaitable[Server]],
    renamed_session: aiohttp.ClientSession,
    trusted: bool,
) -> None:
    storage = await start(_serve_index)
    blobs = storage.authority("blobs.test")
    registry = await start(_redirect_to(lambda: f"http://{blobs}/index?{PRESIGNED}"))
    name = registry.authority("registry.test")
    insecure = {name, blobs} if trusted else {name}
    ref = _ref(name)

    if trusted:
        manifest = await fetch_manifest(ref, session=renamed_session, insecure_registries=insecure)
        assert manifest["schemaVersion"] == 2
        assert len(storage.seen) == 1
        return
    with pytest.raises(RegistryError, match=f"plain-HTTP host {blobs}") as caught:
        await fetch_manifest(ref, session=renamed_session, insecure_registries=insecure)
    assert f"--insecure-registry {blobs}" in caught.value.fix
    assert storage.seen == []
    assert "secret-credential" not in str(caught.value)


async def test_a_bearer_realm_on_an_untrusted_plain_http_host_gets_no_request(
    start: Callable[[Handler], Awaitable[Server]], renamed_session: aiohttp.ClientSession
) -> None:
    tokens = await start(lambda _: _json({"token": TOKEN}))
    realm = f"http://{tokens.authority('auth.test')}/token"

    async def challenge(_: web.Request) -> web.Response:
        return web.Response(status=401, headers={"WWW-Authenticate": f'Bearer realm="{realm}"'})

    registry = await start(challenge)
    name = registry.authority("registry.test")
    with pytest.raises(RegistryError, match=f"plain-HTTP host {tokens.authority('auth.test')}"):
        await fetch_manifest(_ref(name), session=renamed_session, insecure_registries={name})
    assert tokens.seen == []


async def test_a_registry_that_only_accepts_credentials_is_named_with_the_fix(
    start: Callable[[Handler], Awaitable[Server]], session: aiohttp.ClientSession
) -> None:
    async def basic(_: web.Request) -> web.Response:
        return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="x"'})

    registry = await start(basic)
    with pytest.raises(RegistryError, match="requires credentials \\(basic") as caught:
        await fetch_manifest(_ref(registry.authority()), session=session)
    assert "pin the hashes" in caught.value.fix
    assert len(registry.seen) == 1


async def test_a_redirect_loop_ends_with_an_error(
    start: Callable[[Handler], Awaitable[Server]], session: aiohttp.ClientSession
) -> None:
    registry = await start(_redirect_to(lambda: "/v2/elsewhere"))
    with pytest.raises(RegistryError, match=f"more than {MAX_REDIRECTS} times"):
        await fetch_manifest(_ref(registry.authority()), session=session)
    assert len(registry.seen) == MAX_REDIRECTS + 1


async def test_an_unreachable_blob_store_is_named_without_its_presigned_query(
    start: Callable[[Handler], Awaitable[Server]],
    session: aiohttp.ClientSession,
    dead_registry: str,
) -> None:
    registry = await start(_redirect_to(lambda: f"http://{dead_registry}/index?{PRESIGNED}"))
    with pytest.raises(RegistryError, match=f"cannot reach http://{dead_registry}/index") as caught:
        await fetch_manifest(_ref(registry.authority()), session=session)
    assert "secret-credential" not in str(caught.value)
    assert "X-Amz" not in str(caught.value)


@pytest.mark.parametrize("declared", [True, False])
async def test_a_manifest_over_the_size_cap_is_refused(
    start: Callable[[Handler], Awaitable[Server]],
    session: aiohttp.ClientSession,
    declared: bool,
) -> None:
    async def huge(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        if declared:  # refused on the header alone: only a little of it is ever sent
            response.content_length = MAX_MANIFEST_BYTES + 1
        await response.prepare(request)
        chunk = b" " * (256 * 1024)
        sent = 0
        with contextlib.suppress(ConnectionError):  # the client hangs up once over the cap
            while sent <= (0 if declared else MAX_MANIFEST_BYTES):
                await response.write(chunk)
                sent += len(chunk)
        return response

    registry = await start(huge)
    with pytest.raises(RegistryError, match=f"larger than {MAX_MANIFEST_BYTES} bytes"):
        await fetch_manifest(_ref(registry.authority()), session=session)
