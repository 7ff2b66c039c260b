"""The anonymous OCI client against a real registry (distribution 2.8 on loopback)."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.webhook.pins.registry_server import PINS, OciRegistry, TokenRegistry
from webhook.reference import ImageReference
from webhook.registry import (
    MANIFEST_ACCEPT,
    RegistryError,
    fetch_manifest,
    parse_challenge,
    parse_challenges,
)

DIGEST = "sha256:" + "0123456789abcdef" * 4


# -- challenges and headers (pure) ---------------------------------------------------------


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


def test_several_challenges_in_one_header_keep_their_own_parameters() -> None:
    header = (
        'Basic realm="registry", Bearer realm="https://auth.example/token",'
        'service="registry.example", error="insufficient_scope", scope="repository:a\\"b:pull"'
    )
    assert parse_challenges(header) == [
        ("basic", {"realm": "registry"}),
        (
            "bearer",
            {
                "realm": "https://auth.example/token",
                "service": "registry.example",
                "error": "insufficient_scope",
                "scope": 'repository:a"b:pull',
            },
        ),
    ]
    assert parse_challenge(header) == ("basic", {"realm": "registry"})
    assert parse_challenge("") == ("", {})


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
