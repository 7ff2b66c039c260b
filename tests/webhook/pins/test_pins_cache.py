"""The pins cache ConfigMaps: written on success, read only on a registry failure, per digest.

Runs against the Kubernetes API test server, or a real cluster with WSPIN_TEST_KUBECONFIG.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client

from tests.kubeapi import KubeServer
from tests.webhook.pins.registry_server import OciRegistry, RegistryProcess
from webhook.pins import resolve_artifact
from wspin.core.contract import AGENTD, OPENCODE, Artifact
from wspin.core.delivery import AgentdDelivery, ArtifactDelivery, OpencodeDelivery, PinSet
from wspin.core.errors import ConfigError
from wspin.core.kinds import CONFIGMAPS
from wspin.kube.client import Kube

DELIVERIES: dict[str, type[ArtifactDelivery]] = {
    "agentd": AgentdDelivery,
    "opencode": OpencodeDelivery,
}
ARTIFACTS = {"agentd": AGENTD, "opencode": OPENCODE}
EXPECTED = {"agentd": PinSet("a" * 64, "b" * 64), "opencode": PinSet("c" * 64, "d" * 64)}
CACHED = PinSet("e" * 64, "f" * 64)


async def seed_cache(
    kube: Kube, namespace: str, artifact: Artifact, image: str, pins: PinSet = CACHED
) -> None:
    data = {"image": image, "sha256-amd64": pins.amd64, "sha256-arm64": pins.arm64}
    await kube.create(
        CONFIGMAPS,
        {"metadata": {"name": artifact.pins_configmap, "namespace": namespace}, "data": data},
        namespace,
    )


async def cached_data(kube: Kube, namespace: str, artifact: Artifact) -> dict[str, str] | None:
    found = await kube.get_or_none(CONFIGMAPS, artifact.pins_configmap, namespace)
    return None if found is None else dict(found.get("data") or {})


async def resolve(kube: Kube, namespace: str, artifact: str, image: str) -> tuple[PinSet, str]:
    resolved = await resolve_artifact(
        DELIVERIES[artifact](image),
        kube=kube,
        namespace=namespace,
        insecure_registries=frozenset(),
        timeout=5.0,
    )
    return resolved.pins, resolved.source


def during_outage(oci_registry: OciRegistry, dead_registry: str, variant: str = "release") -> str:
    """The same digest, served by a registry that refuses connections."""
    return oci_registry.ref(variant, host=dead_registry)


# -- written after each success -------------------------------------------------------------


@pytest.mark.parametrize("artifact", ["agentd", "opencode"])
async def test_a_registry_success_writes_only_this_artifacts_cache(
    kube: Kube, namespace: str, oci_registry: OciRegistry, artifact: str
) -> None:
    image = oci_registry.ref("release", tag="v1.2.0")
    assert await resolve(kube, namespace, artifact, image) == (EXPECTED[artifact], "registry")
    pins = EXPECTED[artifact]
    assert await cached_data(kube, namespace, ARTIFACTS[artifact]) == {
        "image": image,
        "sha256-amd64": pins.amd64,
        "sha256-arm64": pins.arm64,
    }
    other = OPENCODE if artifact == "agentd" else AGENTD
    assert await cached_data(kube, namespace, other) is None


async def test_a_new_release_replaces_the_cached_entry(
    kube: Kube, namespace: str, oci_registry: OciRegistry
) -> None:
    await seed_cache(kube, namespace, AGENTD, f"old/agentd@sha256:{'9' * 64}")
    image = oci_registry.ref("release")
    await resolve(kube, namespace, "agentd", image)
    assert (await cached_data(kube, namespace, AGENTD) or {})["image"] == image


async def test_a_failed_cache_write_is_logged_and_resolution_still_succeeds(
    kube: Kube,
    namespace: str,
    kube_server: KubeServer,
    oci_registry: OciRegistry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kube_server.fail_next(403, method="POST", path=f"/api/v1/namespaces/{namespace}/configmaps")
    with caplog.at_level(logging.WARNING, logger="webhook.pins"):
        assert await resolve(kube, namespace, "agentd", oci_registry.ref("release")) == (
            EXPECTED["agentd"],
            "registry",
        )
    warned = [r for r in caplog.records if "cannot write the pins cache" in r.getMessage()]
    assert len(warned) == 1
    assert await cached_data(kube, namespace, AGENTD) is None


# -- read only on a registry failure, only for the same digest -------------------------------


@pytest.mark.parametrize("artifact", ["agentd", "opencode"])
async def test_an_unreachable_registry_falls_back_to_a_same_digest_cache(
    kube: Kube, namespace: str, oci_registry: OciRegistry, dead_registry: str, artifact: str
) -> None:
    image = during_outage(oci_registry, dead_registry)
    await seed_cache(kube, namespace, ARTIFACTS[artifact], image)
    assert await resolve(kube, namespace, artifact, image) == (CACHED, "cache")


async def test_a_re_tagged_same_digest_is_served_from_the_cache_during_an_outage(
    kube: Kube, namespace: str, oci_registry: OciRegistry, dead_registry: str
) -> None:
    await seed_cache(
        kube, namespace, AGENTD, oci_registry.ref("release", tag="dev", host=dead_registry)
    )
    image = oci_registry.ref("release", tag="v1.2.0", host=dead_registry)
    assert await resolve(kube, namespace, "agentd", image) == (CACHED, "cache")


async def test_a_cache_is_never_read_while_the_registry_answers(
    kube: Kube, namespace: str, oci_registry: OciRegistry
) -> None:
    image = oci_registry.ref("release")
    await seed_cache(kube, namespace, OPENCODE, image)
    assert await resolve(kube, namespace, "opencode", image) == (EXPECTED["opencode"], "registry")


async def test_a_cache_for_another_digest_is_refused(
    kube: Kube, namespace: str, oci_registry: OciRegistry, dead_registry: str
) -> None:
    await seed_cache(kube, namespace, AGENTD, oci_registry.ref("bare", host=dead_registry))
    with pytest.raises(ConfigError) as caught:
        await resolve(kube, namespace, "agentd", during_outage(oci_registry, dead_registry))
    message = caught.value.message
    assert message.startswith("agentd pins: pins unavailable: registry unreachable and no cache")
    assert "a different digest; refusing to desync" in message
    assert f"{namespace}/llmsafespaces-agentd-pins" in message


async def test_a_cache_without_a_digest_never_matches(
    kube: Kube, namespace: str, oci_registry: OciRegistry, dead_registry: str
) -> None:
    await seed_cache(kube, namespace, AGENTD, f"{dead_registry}/wspin/release:v1.2.0")
    with pytest.raises(ConfigError, match="refusing to desync"):
        await resolve(kube, namespace, "agentd", during_outage(oci_registry, dead_registry))


@pytest.mark.parametrize("bad", [PinSet("E" * 64, "f" * 64), PinSet("e" * 64, "abc")])
async def test_malformed_cached_pins_are_refused(
    kube: Kube, namespace: str, oci_registry: OciRegistry, dead_registry: str, bad: PinSet
) -> None:
    image = during_outage(oci_registry, dead_registry)
    await seed_cache(kube, namespace, OPENCODE, image, bad)
    with pytest.raises(ConfigError, match=r"^opencode pins: pins unavailable.*malformed"):
        await resolve(kube, namespace, "opencode", image)


@pytest.mark.parametrize("artifact", ["agentd", "opencode"])
async def test_no_cache_says_the_registry_is_unreachable_and_how_to_fix_it(
    kube: Kube, namespace: str, oci_registry: OciRegistry, dead_registry: str, artifact: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        await resolve(kube, namespace, artifact, during_outage(oci_registry, dead_registry))
    message, fix = caught.value.message, caught.value.fix
    assert message.startswith(
        f"{artifact} pins: pins unavailable: registry unreachable and no cache matches"
    )
    assert f"ConfigMap {namespace}/llmsafespaces-{artifact}-pins does not exist" in message
    assert f"cannot reach registry {dead_registry}" in message
    assert f"restore the webhook's access to registry {dead_registry}" in fix
    assert f"--{artifact}-binary-sha256-amd64" in fix
    assert f"{artifact}Delivery.binarySHA256Amd64" in fix


async def test_a_forbidden_cache_read_names_the_configmap_and_namespace(
    kube: Kube,
    namespace: str,
    kube_server: KubeServer,
    oci_registry: OciRegistry,
    dead_registry: str,
) -> None:
    image = during_outage(oci_registry, dead_registry)
    await seed_cache(kube, namespace, AGENTD, image)
    kube_server.fail_next(403, method="GET", path=f"/api/v1/namespaces/{namespace}/configmaps")
    with pytest.raises(ConfigError, match="pins unavailable") as caught:
        await resolve(kube, namespace, "agentd", image)
    assert (
        f"reading ConfigMap {namespace}/llmsafespaces-agentd-pins is forbidden"
        in caught.value.message
    )


# -- per-artifact isolation -----------------------------------------------------------------


@pytest.mark.parametrize(("cached", "wanted"), [(AGENTD, "opencode"), (OPENCODE, "agentd")])
async def test_one_artifacts_cache_never_satisfies_the_other(
    kube: Kube,
    namespace: str,
    oci_registry: OciRegistry,
    dead_registry: str,
    cached: Artifact,
    wanted: str,
) -> None:
    image = during_outage(oci_registry, dead_registry)
    await seed_cache(kube, namespace, cached, image)
    with pytest.raises(ConfigError, match=f"^{wanted} pins: pins unavailable") as caught:
        await resolve(kube, namespace, wanted, image)
    assert f"llmsafespaces-{wanted}-pins does not exist" in caught.value.message


# -- an outage after a first resolve --------------------------------------------------------


async def test_an_outage_after_a_first_resolve_is_served_from_the_cache_it_wrote(
    kube: Kube, namespace: str, oci_registry: OciRegistry, extra_registry: RegistryProcess
) -> None:
    image = oci_registry.ref("release", host=extra_registry.host)
    assert await resolve(kube, namespace, "opencode", image) == (EXPECTED["opencode"], "registry")
    extra_registry.stop()
    assert await resolve(kube, namespace, "opencode", image) == (EXPECTED["opencode"], "cache")


# -- an API server that never answers ---------------------------------------------------------


@pytest.fixture
async def silent_kube() -> AsyncIterator[Kube]:
    """A Kube whose API server accepts connections and never answers."""
    held: list[asyncio.StreamWriter] = []

    async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    api = client.ApiClient(configuration)
    try:
        yield Kube(api)
    finally:
        await api.close()
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_a_silent_api_server_during_an_outage_ends_start_with_the_cause(
    silent_kube: Kube, oci_registry: OciRegistry, dead_registry: str
) -> None:
    image = during_outage(oci_registry, dead_registry)
    async with asyncio.timeout(10):  # the resolver's own bound must end it long before
        with pytest.raises(ConfigError, match="pins unavailable") as caught:
            await resolve_artifact(
                AgentdDelivery(image),
                kube=silent_kube,
                namespace="ns",
                insecure_registries=frozenset(),
                cache_timeout=0.2,
            )
    assert "ConfigMap ns/llmsafespaces-agentd-pins got no answer within 0.2s" in str(caught.value)


async def test_a_silent_api_server_does_not_hold_up_a_registry_success(
    silent_kube: Kube, oci_registry: OciRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    async with asyncio.timeout(10):
        with caplog.at_level(logging.WARNING, logger="webhook.pins"):
            resolved = await resolve_artifact(
                OpencodeDelivery(oci_registry.ref("release")),
                kube=silent_kube,
                namespace="ns",
                insecure_registries=frozenset(),
                cache_timeout=0.2,
            )
    assert (resolved.pins, resolved.source) == (EXPECTED["opencode"], "registry")
    assert any("no answer within 0.2s" in str(r.fields) for r in caplog.records)  # type: ignore[attr-defined]
