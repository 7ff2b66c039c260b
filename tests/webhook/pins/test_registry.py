"""The anonymous OCI client against a real registry (distribution 2.8 on loopback)."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from tests.webhook.pins.registry_server import PINS, OciRegistry, TokenRegistry
from webhook.registry import (
    MANIFEST_ACCEPT,
    ImageReference,
    RegistryError,
    check_insecure_registries,
    fetch_manifest,
    parse_challenge,
    scheme_for,
)
from wspin.errors import ConfigError

DIGEST = "sha256:" + "0123456789abcdef" * 4


# -- references (pure) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "registry", "repository", "tag", "api_host"),
    [
        (f"ubuntu@{DIGEST}", "docker.io", "library/ubuntu", None, "registry-1.docker.io"),
        (f"ubuntu:24.04@{DIGEST}", "docker.io", "library/ubuntu", "24.04", "registry-1.docker.io"),
        (f"bitnami/redis@{DIGEST}", "docker.io", "bitnami/redis", None, "registry-1.docker.io"),
        (f"docker.io/ubuntu@{DIGEST}", "docker.io", "library/ubuntu", None, "registry-1.docker.io"),
        (f"index.docker.io/x/y@{DIGEST}", "docker.io", "x/y", None, "registry-1.docker.io"),
        (
            f"ghcr.io/lenaxia/llmsafespaces/agentd:v1.2.0@{DIGEST}",
            "ghcr.io",
            "lenaxia/llmsafespaces/agentd",
            "v1.2.0",
            "ghcr.io",
        ),
        (f"localhost/agentd@{DIGEST}", "localhost", "agentd", None, "localhost"),
        (f"localhost:5000/a/b:dev@{DIGEST}", "localhost:5000", "a/b", "dev", "localhost:5000"),
        (f"127.0.0.1:5000/agentd@{DIGEST}", "127.0.0.1:5000", "agentd", None, "127.0.0.1:5000"),
        (f"[::1]:5000/agentd@{DIGEST}", "[::1]:5000", "agentd", None, "[::1]:5000"),
    ],
)
def test_references_are_normalised_like_docker(
    image: str, registry: str, repository: str, tag: str | None, api_host: str
) -> None:
    ref = ImageReference.parse(image)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (
        registry,
        repository,
        tag,
        DIGEST,
    )
    assert ref.api_host == api_host


@pytest.mark.parametrize(
    ("image", "says"),
    [
        ("ghcr.io/x/agentd:v1", "not digest-pinned"),
        ("ghcr.io/x/agentd", "not digest-pinned"),
        (f"@{DIGEST}", "not digest-pinned"),
        ("ghcr.io/x/agentd@sha256:" + "A" * 64, "not digest-pinned"),
        ("ghcr.io/x/agentd@sha256:abc", "not digest-pinned"),
        ("ghcr.io/x/agentd@sha512:" + "0" * 128, "not digest-pinned"),
        (f"ghcr.io/X/Agentd@{DIGEST}", "invalid repository"),
        (f"ghcr.io/x/agentd:bad!tag@{DIGEST}", "invalid tag"),
    ],
)
def test_references_that_are_not_digest_pinned_are_refused(image: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        ImageReference.parse(image)
    assert caught.value.fix


@pytest.mark.parametrize(
    ("registry", "insecure", "scheme"),
    [
        ("127.0.0.1:5000", (), "http"),
        ("127.0.0.2", (), "http"),
        ("localhost:5000", (), "http"),
        ("LOCALHOST:5000", (), "http"),
        ("[::1]:5000", (), "http"),
        ("ghcr.io", (), "https"),
        ("registry.internal:5000", (), "https"),
        ("registry.internal:5000", ("registry.internal:5000",), "http"),
        ("Registry.Internal:5000", ("registry.internal:5000",), "http"),
        ("registry.internal:5001", ("registry.internal:5000",), "https"),
        ("10.0.0.1:5000", (), "https"),
    ],
)
def test_plain_http_only_for_loopback_and_insecure_registries(
    registry: str, insecure: tuple[str, ...], scheme: str
) -> None:
    ref = ImageReference.parse(f"{registry}/agentd@{DIGEST}")
    assert scheme_for(ref, check_insecure_registries(insecure)) == scheme


@pytest.mark.parametrize("value", ["http://registry:5000", "registry:5000/path", "a b"])
def test_insecure_registry_entries_must_be_host_and_port(value: str) -> None:
    with pytest.raises(ConfigError, match="--insecure-registry takes HOST:PORT"):
        check_insecure_registries([value])


def test_bearer_challenge_parameters_are_parsed_including_quoted_commas() -> None:
    scheme, params = parse_challenge(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
        'scope="repository:library/ubuntu:pull,push"'
    )
    assert scheme == "bearer"
    assert params == {
        "realm": "https://auth.docker.io/token",
        "service": "registry.docker.io",
        "scope": "repository:library/ubuntu:pull,push",
    }


def test_accept_header_names_oci_index_and_docker_manifest_list() -> None:
    assert "application/vnd.oci.image.index.v1+json" in MANIFEST_ACCEPT
    assert "application/vnd.docker.distribution.manifest.list.v2+json" in MANIFEST_ACCEPT


# -- against the real registry --------------------------------------------------------------


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


async def test_index_is_read_by_digest_with_its_annotations(
    oci_registry: OciRegistry, session: aiohttp.ClientSession
) -> None:
    manifest = await fetch_manifest(
        ImageReference.parse(oci_registry.ref("release")), session=session
    )
    assert manifest["mediaType"] == "application/vnd.oci.image.index.v1+json"
    assert {k: manifest["annotations"][k] for k in PINS} == PINS


async def test_tag_and_digest_form_fetches_by_digest_and_ignores_the_tag(
    oci_registry: OciRegistry, session: aiohttp.ClientSession
) -> None:
    # "no-such-tag" was never pushed: a fetch by tag would 404.
    ref = ImageReference.parse(oci_registry.ref("release", tag="no-such-tag"))
    manifest = await fetch_manifest(ref, session=session)
    assert manifest["annotations"][next(iter(PINS))] == "a" * 64


async def test_docker_manifest_list_is_accepted(
    oci_registry: OciRegistry, session: aiohttp.ClientSession
) -> None:
    manifest = await fetch_manifest(
        ImageReference.parse(oci_registry.ref("docker-list")), session=session
    )
    assert manifest["mediaType"] == "application/vnd.docker.distribution.manifest.list.v2+json"


async def test_unknown_digest_is_a_registry_error_naming_repository_and_digest(
    oci_registry: OciRegistry, session: aiohttp.ClientSession
) -> None:
    ref = ImageReference.parse(f"{oci_registry.host}/wspin/release@{DIGEST}")
    with pytest.raises(RegistryError, match="HTTP 404") as caught:
        await fetch_manifest(ref, session=session)
    assert DIGEST in caught.value.message


async def test_unreachable_registry_is_a_registry_error(session: aiohttp.ClientSession) -> None:
    with socket.socket() as held:  # bound, never listening: connections are refused
        held.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{held.getsockname()[1]}"
        with pytest.raises(RegistryError, match=f"cannot reach registry {host}"):
            await fetch_manifest(ImageReference.parse(f"{host}/a@{DIGEST}"), session=session)


async def test_bearer_challenge_from_the_real_registry_is_answered_with_an_anonymous_token(
    oci_registry: OciRegistry, token_registry: TokenRegistry, session: aiohttp.ClientSession
) -> None:
    """The registry runs with ``auth: token`` and a test-generated signing certificate, so
    the challenge and the token check are distribution's own; the token service is aiohttp."""
    ref = ImageReference.parse(oci_registry.ref("release", host=token_registry.host))
    manifest = await fetch_manifest(ref, session=session)
    assert manifest["annotations"] == oci_registry.images["release"].annotations
    assert token_registry.requests == [
        {
            "service": token_registry.service,
            "scope": "repository:wspin/release:pull",
            "authorization": None,
        }
    ]


async def test_a_token_the_registry_rejects_fails_without_revealing_the_token(
    oci_registry: OciRegistry, token_registry: TokenRegistry, session: aiohttp.ClientSession
) -> None:
    token_registry.forge = True
    ref = ImageReference.parse(oci_registry.ref("release", host=token_registry.host))
    with pytest.raises(RegistryError, match="refused an anonymous read") as caught:
        await fetch_manifest(ref, session=session)
    assert token_registry.issued
    for token in token_registry.issued:
        for part in token.split("."):
            assert part not in str(caught.value)


class _StaticResolver(AbstractResolver):
    """Resolves every name to 127.0.0.1, so a non-loopback name reaches the test registry."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            ResolveResult(
                hostname=host,
                host="127.0.0.1",
                port=port,
                family=socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
        ]

    async def close(self) -> None:
        return None


@pytest.fixture
async def renamed_session() -> AsyncIterator[aiohttp.ClientSession]:
    connector = aiohttp.TCPConnector(resolver=_StaticResolver())
    async with aiohttp.ClientSession(connector=connector) as client:
        yield client


async def test_insecure_registry_flag_allows_plain_http_to_a_named_host(
    oci_registry: OciRegistry, renamed_session: aiohttp.ClientSession
) -> None:
    port = oci_registry.host.rsplit(":", 1)[1]
    ref = ImageReference.parse(oci_registry.ref("release", host=f"registry.test:{port}"))
    manifest = await fetch_manifest(
        ref, session=renamed_session, insecure_registries={f"registry.test:{port}"}
    )
    assert manifest["annotations"][next(iter(PINS))] == "a" * 64


async def test_a_named_host_without_the_flag_is_spoken_to_over_https_only(
    oci_registry: OciRegistry, renamed_session: aiohttp.ClientSession
) -> None:
    port = oci_registry.host.rsplit(":", 1)[1]
    ref = ImageReference.parse(oci_registry.ref("release", host=f"registry.test:{port}"))
    with pytest.raises(RegistryError, match=r"\(https\)") as caught:
        await fetch_manifest(ref, session=renamed_session)
    assert "--insecure-registry" in caught.value.fix


@pytest.fixture
async def tampering_mirror(oci_registry: OciRegistry) -> AsyncIterator[str]:
    """A loopback pull-through proxy that adds a key to every manifest it forwards."""

    async def forward(request: web.Request) -> web.Response:
        async with (
            aiohttp.ClientSession() as client,
            client.get(
                f"http://{oci_registry.host}{request.path}",
                headers={"Accept": request.headers.get("Accept", "")},
            ) as upstream,
        ):
            document: dict[str, Any] = json.loads(await upstream.read())
            document["annotations"] = {**document.get("annotations", {}), "x": "y"}
            return web.Response(
                body=json.dumps(document).encode(),
                status=upstream.status,
                content_type=upstream.content_type,
            )

    app = web.Application()
    app.router.add_get("/v2/{tail:.*}", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def test_content_that_does_not_hash_to_the_pinned_digest_is_refused(
    oci_registry: OciRegistry, tampering_mirror: str, session: aiohttp.ClientSession
) -> None:
    ref = ImageReference.parse(oci_registry.ref("release", host=tampering_mirror))
    with pytest.raises(RegistryError, match="it is not the pinned content") as caught:
        await fetch_manifest(ref, session=session)
    pinned = oci_registry.images["release"].digest
    assert pinned in caught.value.message
