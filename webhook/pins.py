"""Pin resolution: where each artifact's per-arch sha256 pins come from at start.

Three sources, tried in this order:

1. ``flags``: both hash flags given. A manual override; no registry or cluster call at all.
2. ``registry``: the image index at the pinned digest carries the pins as annotations
   (``dev.llmsafespaces/<artifact>.sha256-<arch>``). Missing or malformed annotations fail
   closed: that image is not delivery-compatible, and no cache may paper over it. A success
   is written to the artifact's cache ConfigMap.
3. ``cache``: only when the registry cannot be read, and only when the ConfigMap was written
   for the same digest (tags are ignored, so a re-tagged release still hits).

Each artifact has its own annotations and its own ConfigMap; one never satisfies the other.
Every error names the artifact and says how to fix it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from webhook.reference import ImageReference
from wspin.core.contract import ARCHES, PINS_KEY_IMAGE, Arch, Artifact, pins_key
from wspin.core.delivery import SHA256_HEX, ArtifactDelivery, PinSet, ResolvedArtifact, same_digest
from wspin.core.errors import AlreadyExists, ConfigError, Forbidden, KubeAPIError, NotFound
from wspin.core.kinds import CONFIGMAPS
from wspin.core.logs import fields
from wspin.kube.client import Kube

if TYPE_CHECKING:
    import aiohttp

# asyncio is imported by the coroutines that use it: flag definitions here are on the path
# of `wspin webhook --help`, which needs no event loop.

log = logging.getLogger(__name__)

CACHE_LABELS = {"app.kubernetes.io/name": "wspin", "app.kubernetes.io/component": "pins-cache"}
CACHE_TIMEOUT = 10.0
"""Seconds for the pins-cache read, and again for its write: start must end even when the
API server accepts connections and never answers (the registry read has its own bound)."""


def pins_from_annotations(artifact: Artifact, annotations: Mapping[str, Any], image: str) -> PinSet:
    """This artifact's two pins from the index annotations; fail closed when not both valid."""
    found: dict[Arch, str] = {}
    for arch in ARCHES:
        key = artifact.index_annotation(arch)
        value = annotations.get(key)
        if value is None:
            raise _error(
                artifact,
                f"the image index of {image} is missing the pin annotation {key}",
                "not delivery-compatible: use an image built by the release pipeline, which "
                "stamps both per-arch annotations, or pin the hashes manually",
            )
        if not isinstance(value, str) or not SHA256_HEX.match(value):
            raise _error(
                artifact,
                f"the image index of {image} has a malformed pin annotation {key} "
                "(expected 64 lowercase hex characters)",
                "not delivery-compatible: rebuild the release, or pin the hashes manually",
            )
        found[arch] = value
    return PinSet(found["amd64"], found["arm64"])


async def resolve_artifact(
    delivery: ArtifactDelivery,
    *,
    kube: Kube | None,
    namespace: str,
    insecure_registries: frozenset[str],
    session: aiohttp.ClientSession | None = None,
    timeout: float = 30.0,  # noqa: ASYNC109 - bounds the registry read only, never the cache
    write_cache: bool = True,
    cache_timeout: float = CACHE_TIMEOUT,
) -> ResolvedArtifact:
    """The pins one artifact's pods receive, and where they came from.

    ``kube`` is None when the process has no API access: then there is no cache to write or
    read. ``write_cache=False`` reads without writing, for a check of a release that is not
    rolled out yet (its digest must not evict the running release's cache entry).
    Raises ConfigError, prefixed with the artifact, on every failure.
    """
    # The registry client (and aiohttp) only when a registry is read: `--help` stays instant.
    import asyncio

    from webhook.registry import RegistryError

    delivery.validate()
    artifact, image = delivery.artifact, delivery.image
    if not delivery.needs_resolution:
        return ResolvedArtifact(artifact, image, delivery.manual_pins(), source="flags")
    try:
        async with asyncio.timeout(timeout):
            annotations = await _read_annotations(image, insecure_registries, session)
    except (RegistryError, TimeoutError) as err:
        reason = err.message if isinstance(err, RegistryError) else f"no answer within {timeout:g}s"
        log.warning(
            "pin registry read failed, trying the pins cache",
            extra=fields(artifact=artifact.name, image=image, error=reason),
        )
        pins = await _read_cache(artifact, image, kube, namespace, reason, cache_timeout)
        _log_resolved(artifact, image, "cache")
        return ResolvedArtifact(artifact, image, pins, source="cache")
    except ConfigError as err:
        raise _error(artifact, err.message, err.fix) from err
    pins = pins_from_annotations(artifact, annotations, image)
    if kube is not None and write_cache:
        await _write_cache(kube, namespace, artifact, image, pins, cache_timeout)
    _log_resolved(artifact, image, "registry")
    return ResolvedArtifact(artifact, image, pins, source="registry")


async def _read_annotations(
    image: str, insecure_registries: frozenset[str], session: aiohttp.ClientSession | None
) -> Mapping[str, Any]:
    import aiohttp

    from webhook.registry import fetch_manifest

    ref = ImageReference.parse(image)
    if session is None:
        async with aiohttp.ClientSession() as own:
            manifest = await fetch_manifest(
                ref, session=own, insecure_registries=insecure_registries
            )
    else:
        manifest = await fetch_manifest(
            ref, session=session, insecure_registries=insecure_registries
        )
    annotations = manifest.get("annotations")
    return annotations if isinstance(annotations, dict) else {}


# -- the cache ----------------------------------------------------------------------------


def _cache_fix(artifact: Artifact, image: str) -> str:
    flag = f"--{artifact.name}-binary-sha256"
    helm = f"{artifact.name}Delivery.binarySHA256"
    registry = ImageReference.parse(image).registry
    return (
        f"restore the webhook's access to registry {registry} (a plain-HTTP registry needs "
        f"--insecure-registry HOST:PORT), or pin the hashes manually with {flag}-amd64 and "
        f"{flag}-arm64 / {helm}Amd64 and {helm}Arm64"
    )


async def _read_cache(
    artifact: Artifact,
    image: str,
    kube: Kube | None,
    namespace: str,
    registry_error: str,
    timeout: float,  # noqa: ASYNC109 - one API call, bounded on its own
) -> PinSet:
    """The cached pins for this exact digest, or the "pins unavailable" error with its cause."""
    name = artifact.pins_configmap

    def unavailable(why: str) -> ConfigError:
        return _error(
            artifact,
            f"pins unavailable: registry unreachable and no cache matches ({registry_error}; "
            f"{why})",
            _cache_fix(artifact, image),
        )

    if kube is None:
        raise unavailable("no Kubernetes API access to read the pins cache")
    try:
        import asyncio

        async with asyncio.timeout(timeout):
            cached = await kube.get(CONFIGMAPS, name, namespace)
    except TimeoutError as err:
        raise unavailable(
            f"reading ConfigMap {namespace}/{name} got no answer within {timeout:g}s"
        ) from err
    except NotFound as err:
        raise unavailable(f"ConfigMap {namespace}/{name} does not exist") from err
    except Forbidden as err:
        raise unavailable(
            f"reading ConfigMap {namespace}/{name} is forbidden: grant the webhook's service "
            "account get on it"
        ) from err
    except KubeAPIError as err:
        raise unavailable(f"reading ConfigMap {namespace}/{name} failed: {err.message}") from err
    data = cached.get("data") or {}
    cached_image = str(data.get(PINS_KEY_IMAGE, ""))
    if not same_digest(cached_image, image):
        raise unavailable(
            f"ConfigMap {namespace}/{name} holds pins for {cached_image or 'no image'}, "
            "a different digest; refusing to desync the pods from their image"
        )
    values = [str(data.get(pins_key(arch), "")) for arch in ARCHES]
    if not all(SHA256_HEX.match(value) for value in values):
        raise unavailable(
            f"ConfigMap {namespace}/{name} holds malformed pins (expected 64 lowercase hex)"
        )
    return PinSet(values[0], values[1])


async def _write_cache(
    kube: Kube,
    namespace: str,
    artifact: Artifact,
    image: str,
    pins: PinSet,
    timeout: float,  # noqa: ASYNC109 - the whole get/create/update, bounded on its own
) -> None:
    """Create or update this artifact's ConfigMap; a failure is logged, never fatal.

    Only get, create and update are used: those are the verbs the chart's Role grants, with
    get and update restricted to this ConfigMap's name.
    """
    name = artifact.pins_configmap
    data = {
        PINS_KEY_IMAGE: image,
        pins_key("amd64"): pins.amd64,
        pins_key("arm64"): pins.arm64,
    }
    try:
        import asyncio

        async with asyncio.timeout(timeout):
            await _upsert_cache(kube, namespace, name, data)
    except (KubeAPIError, TimeoutError) as err:
        error = err.message if isinstance(err, KubeAPIError) else f"no answer within {timeout:g}s"
        log.warning(
            "cannot write the pins cache; a later registry outage will stop the webhook "
            "from starting",
            extra=fields(artifact=artifact.name, configmap=f"{namespace}/{name}", error=error),
        )


async def _upsert_cache(kube: Kube, namespace: str, name: str, data: dict[str, str]) -> None:
    current = await kube.get_or_none(CONFIGMAPS, name, namespace)
    if current is None:
        body = {"metadata": {"name": name, "namespace": namespace, "labels": CACHE_LABELS}}
        try:
            await kube.create(CONFIGMAPS, {**body, "data": data}, namespace)
            return
        except AlreadyExists:
            current = await kube.get(CONFIGMAPS, name, namespace)
    if current.get("data") != data:
        await kube.replace(CONFIGMAPS, {**current, "data": data})


def _log_resolved(artifact: Artifact, image: str, source: str) -> None:
    log.info("pins resolved", extra=fields(artifact=artifact.name, image=image, source=source))


def _error(artifact: Artifact, message: str, fix: str) -> ConfigError:
    return ConfigError(f"{artifact.name} pins: {message}", fix)
