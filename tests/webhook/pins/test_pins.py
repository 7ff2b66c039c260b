"""Pin resolution without the cache: manual pins, annotations, fail-closed errors, flags."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.webhook.pins.registry_server import OciRegistry
from webhook.pins import resolve_artifact
from webhook.settings import add_pins_flags, insecure_registries_from_args
from wspin.core.delivery import (
    AgentdDelivery,
    ArtifactDelivery,
    OpencodeDelivery,
    PinSet,
    same_digest,
)
from wspin.core.errors import ConfigError
from wspin.core.flags import Parser
from wspin.kube.client import Kube

DELIVERIES: dict[str, type[ArtifactDelivery]] = {
    "agentd": AgentdDelivery,
    "opencode": OpencodeDelivery,
}
EXPECTED = {"agentd": PinSet("a" * 64, "b" * 64), "opencode": PinSet("c" * 64, "d" * 64)}
X = "0123456789abcdef" * 4
Y = "fedcba9876543210" * 4


@pytest.fixture
async def counting_session() -> AsyncIterator[tuple[aiohttp.ClientSession, list[str]]]:
    """A client session that records every request it starts."""
    started: list[str] = []

    async def on_start(_: Any, __: Any, params: aiohttp.TraceRequestStartParams) -> None:
        started.append(str(params.url))

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_start)
    async with aiohttp.ClientSession(trace_configs=[trace]) as session:
        yield session, started


class RecordingKube(Kube):
    """A Kube whose every call is recorded and refused: proves no cluster access happened."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self.calls.append(f"{method} {path}")
        raise AssertionError(f"unexpected API call {method} {path}")


# -- manual pins ----------------------------------------------------------------------------


@pytest.mark.parametrize("artifact", ["agentd", "opencode"])
async def test_manual_pins_are_returned_unchanged_without_registry_or_cluster_calls(
    artifact: str,
    dead_registry: str,
    counting_session: tuple[aiohttp.ClientSession, list[str]],
) -> None:
    session, started = counting_session
    kube = RecordingKube()
    delivery = DELIVERIES[artifact](f"{dead_registry}/x@sha256:{X}", "e" * 64, "f" * 64)
    resolved = await resolve_artifact(
        delivery, kube=kube, namespace="ns", insecure_registries=frozenset(), session=session
    )
    assert (resolved.pins, resolved.source) == (PinSet("e" * 64, "f" * 64), "flags")
    assert started == []
    assert kube.calls == []


@pytest.mark.parametrize(
    ("amd64", "arm64", "says"),
    [("e" * 64, "", "BOTH"), ("E" * 64, "f" * 64, "64 hex"), ("e" * 64, "abc", "64 hex")],
)
async def test_invalid_manual_pins_are_refused(amd64: str, arm64: str, says: str) -> None:
    delivery = OpencodeDelivery(f"ghcr.io/x/opencode@sha256:{Y}", amd64, arm64)
    with pytest.raises(ConfigError, match=says) as caught:
        await resolve_artifact(delivery, kube=None, namespace="ns", insecure_registries=frozenset())
    assert caught.value.message.startswith("opencode delivery")


async def test_tag_only_image_is_refused_before_any_request(
    counting_session: tuple[aiohttp.ClientSession, list[str]],
) -> None:
    session, started = counting_session
    with pytest.raises(ConfigError, match="pinned by digest") as caught:
        await resolve_artifact(
            AgentdDelivery("ghcr.io/x/agentd:v1"),
            kube=None,
            namespace="ns",
            insecure_registries=frozenset(),
            session=session,
        )
    assert "--agentd-image" in str(caught.value)
    assert started == []


# -- from the registry ----------------------------------------------------------------------


@pytest.mark.parametrize("artifact", ["agentd", "opencode"])
@pytest.mark.parametrize("tag", [None, "v1.2.0", "dev"])
async def test_pins_are_read_from_the_index_annotations(
    oci_registry: OciRegistry, artifact: str, tag: str | None
) -> None:
    delivery = DELIVERIES[artifact](oci_registry.ref("release", tag=tag))
    resolved = await resolve_artifact(
        delivery, kube=None, namespace="ns", insecure_registries=frozenset()
    )
    assert resolved.pins == EXPECTED[artifact]
    assert resolved.source == "registry"
    assert resolved.image == delivery.image
    assert resolved.artifact is delivery.artifact


@pytest.mark.parametrize("artifact", ["agentd", "opencode"])
async def test_an_index_without_pin_annotations_fails_closed_naming_the_artifact(
    oci_registry: OciRegistry, artifact: str
) -> None:
    with pytest.raises(ConfigError, match=f"^{artifact} pins: .*missing the pin annotation"):
        await resolve_artifact(
            DELIVERIES[artifact](oci_registry.ref("bare")),
            kube=None,
            namespace="ns",
            insecure_registries=frozenset(),
        )


@pytest.mark.parametrize(
    ("artifact", "variant"), [("agentd", "opencode-only"), ("opencode", "agentd-only")]
)
async def test_one_artifacts_annotations_never_satisfy_the_other(
    oci_registry: OciRegistry, artifact: str, variant: str
) -> None:
    with pytest.raises(ConfigError, match=f"^{artifact} pins: .*dev.llmsafespaces/{artifact}."):
        await resolve_artifact(
            DELIVERIES[artifact](oci_registry.ref(variant)),
            kube=None,
            namespace="ns",
            insecure_registries=frozenset(),
        )


@pytest.mark.parametrize(
    ("artifact", "key"),
    [("agentd", "agentd.sha256-amd64"), ("opencode", "opencode.sha256-amd64")],
)
async def test_a_malformed_pin_annotation_fails_closed(
    oci_registry: OciRegistry, artifact: str, key: str
) -> None:
    with pytest.raises(ConfigError, match=f"^{artifact} pins: .*malformed .*{key}") as caught:
        await resolve_artifact(
            DELIVERIES[artifact](oci_registry.ref("malformed")),
            kube=None,
            namespace="ns",
            insecure_registries=frozenset(),
        )
    assert "not delivery-compatible" in caught.value.fix


async def test_unreachable_registry_without_cluster_access_says_how_to_fix_it(
    dead_registry: str,
) -> None:
    with pytest.raises(ConfigError) as caught:
        await resolve_artifact(
            AgentdDelivery(f"{dead_registry}/wspin/release@sha256:{X}"),
            kube=None,
            namespace="ns",
            insecure_registries=frozenset(),
        )
    message, fix = caught.value.message, caught.value.fix
    assert message.startswith("agentd pins: pins unavailable: registry unreachable and no cache")
    assert f"cannot reach registry {dead_registry}" in message
    assert "--agentd-binary-sha256-amd64" in fix
    assert "restore" in fix


async def test_a_registry_that_never_answers_is_bounded_by_the_timeout() -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    host = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        with pytest.raises(ConfigError, match=r"no answer within 0\.2s"):
            await resolve_artifact(
                OpencodeDelivery(f"{host}/wspin/release@sha256:{Y}"),
                kube=None,
                namespace="ns",
                insecure_registries=frozenset(),
                timeout=0.2,
            )
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()
    assert accepted, "the resolver never connected"


# -- sameDigest -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("left", "right", "same"),
    [
        (f"r/a:dev@sha256:{X}", f"r/a:v1.2.0@sha256:{X}", True),
        (f"r/a@sha256:{X}", f"other.io/b:v1@sha256:{X}", True),
        (f"r/a@sha256:{X}", f"r/a@sha256:{Y}", False),
        ("r/a:v1", f"r/a@sha256:{X}", False),
        (f"r/a@sha256:{X}", "r/a:v1", False),
        ("r/a:v1", "r/a:v1", False),
        ("", "", False),
    ],
)
def test_same_digest_compares_only_the_digest(left: str, right: str, same: bool) -> None:
    assert same_digest(left, right) is same


# -- flags ----------------------------------------------------------------------------------


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = Parser()
    add_pins_flags(parser)
    return parser.parse_args(argv)


def test_insecure_registry_is_repeatable_and_skip_probe_defaults_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("WSPIN_INSECURE_REGISTRY", raising=False)
    monkeypatch.delenv("WSPIN_SKIP_IMAGE_VOLUME_PROBE", raising=False)
    args = _parse(["--insecure-registry", "a:5000", "--insecure-registry", "B:5001"])
    assert insecure_registries_from_args(args) == frozenset({"a:5000", "b:5001"})
    assert args.skip_image_volume_probe is False


def test_pins_flags_read_their_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WSPIN_INSECURE_REGISTRY", "a:5000,b:5001")
    monkeypatch.setenv("WSPIN_SKIP_IMAGE_VOLUME_PROBE", "true")
    args = _parse([])
    assert insecure_registries_from_args(args) == frozenset({"a:5000", "b:5001"})
    assert args.skip_image_volume_probe is True


def test_an_insecure_registry_url_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WSPIN_INSECURE_REGISTRY", raising=False)
    with pytest.raises(ConfigError, match="HOST:PORT"):
        insecure_registries_from_args(_parse(["--insecure-registry", "http://a:5000"]))
