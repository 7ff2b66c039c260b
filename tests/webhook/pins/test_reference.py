"""Image references and the plain-HTTP rule (pure: no registry involved)."""

from __future__ import annotations

import pytest
from yarl import URL

from webhook.reference import (
    ImageReference,
    authority_of,
    check_insecure_registries,
    plain_http_allowed,
    scheme_for,
)
from wspin.core.errors import ConfigError

DIGEST = "sha256:" + "0123456789abcdef" * 4


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


@pytest.mark.parametrize(
    ("url", "insecure", "allowed"),
    [
        ("http://127.0.0.1:9000/blob", (), True),
        ("http://localhost/blob", (), True),
        ("http://[::1]:9000/blob", (), True),
        ("http://blobs.example:9000/blob", (), False),
        ("http://blobs.example:9000/blob", ("blobs.example:9000",), True),
        ("http://Blobs.Example:9000/blob", ("blobs.example:9000",), True),
        ("http://blobs.example/blob", ("blobs.example",), True),
        ("http://blobs.example:80/blob", ("blobs.example:80",), True),
        ("http://blobs.example:9001/blob", ("blobs.example:9000",), False),
        ("http://[fd00::1]:5000/blob", ("[fd00::1]:5000",), True),
    ],
)
def test_a_url_a_registry_hands_out_gets_the_same_plain_http_rule(
    url: str, insecure: tuple[str, ...], allowed: bool
) -> None:
    target = URL(url)
    assert plain_http_allowed(target, check_insecure_registries(insecure)) is allowed
    if allowed and insecure:
        assert authority_of(target) == insecure[0].lower()
