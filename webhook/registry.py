"""An anonymous, read-only OCI distribution client: fetch one manifest by its pinned digest.

The only registry traffic wspin makes is at start: read the image index of each delivered
artifact to learn its per-arch pins (reference/pod-delivery.md §1.4). So this client does one
thing, a digest-pinned ``GET /v2/<repo>/manifests/sha256:…``, and does it the way container
runtimes do:

- references are normalised like Docker's (``ubuntu`` → ``docker.io/library/ubuntu``, served
  by ``registry-1.docker.io``); a ``:tag`` before the digest is accepted and ignored;
- loopback registries (``localhost``, ``127.0.0.1``, ``::1``) and the ``--insecure-registry``
  entries are spoken to over plain HTTP, every other registry over HTTPS only;
- a ``401`` with a ``Bearer`` challenge is answered by asking the challenge's realm for an
  anonymous token and retrying once; tokens are never logged or put in an error;
- the body's sha256 must equal the pinned digest, so a registry (or a proxy in between)
  cannot hand out different annotations for the digest the pods will run.

Every failure is a ``RegistryError``: the caller may fall back to its cache for it.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from wspin.errors import ConfigError, WspinError

# What the pins live on (an index) first; single manifests too, so that an image that was
# pushed without an index is reported as "no pin annotations" rather than "not found".
MANIFEST_ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
# Registries must accept manifests of at least 4 MiB (OCI distribution spec); anything
# larger is not an image index we could have produced.
MAX_MANIFEST_BYTES = 4 * 1024 * 1024

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
_DOCKER_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_REPOSITORY = re.compile(
    r"^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$"
)
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_CHALLENGE_PARAM = re.compile(r'(\w+)\s*=\s*(?:"([^"]*)"|([^\s,]+))')


class RegistryError(WspinError):
    """Reading the manifest failed: unreachable, refused, not found, or not the pinned bytes."""


@dataclass(frozen=True)
class ImageReference:
    """A digest-pinned image reference split into what the distribution API needs."""

    registry: str
    """``host[:port]`` as written (``docker.io`` for Docker Hub)."""
    repository: str
    """Repository path inside the registry (``library/ubuntu``)."""
    digest: str
    """``sha256:<64 hex>``: what is fetched and what the body must hash to."""
    tag: str | None = None
    """The informational tag of a ``repo:tag@sha256:…`` reference; never used to fetch."""

    @classmethod
    def parse(cls, image: str) -> ImageReference:
        """Split ``[registry/]repo[:tag]@sha256:<hex>``; ConfigError when it is not that."""
        name, sep, digest = image.rpartition("@")
        if not sep or not name:
            raise ConfigError(
                f"image {image!r} is not digest-pinned: the pins can only be read for an exact "
                "digest",
                "use the 'repo@sha256:<64 hex>' or 'repo:tag@sha256:<64 hex>' form",
            )
        if not _DIGEST.match(digest):
            raise ConfigError(
                f"image {image!r} is not digest-pinned: {digest!r} is not "
                "sha256:<64 lowercase hex>",
                "copy the full digest from the registry or the release notes",
            )
        registry, rest = DOCKER_HUB, name
        first, slash, remainder = name.partition("/")
        if slash and ("." in first or ":" in first or first == "localhost"):
            registry, rest = first, remainder
        tag: str | None = None
        path, colon, maybe_tag = rest.rpartition(":")
        if colon and "/" not in maybe_tag:
            rest, tag = path, maybe_tag
            if not _TAG.match(tag):
                raise ConfigError(
                    f"image {image!r} has an invalid tag {tag!r}",
                    "drop the tag or use letters, digits, '_', '.' and '-' only",
                )
        if registry.lower() in _DOCKER_HUB_ALIASES:
            registry = DOCKER_HUB
            if "/" not in rest:
                rest = f"library/{rest}"
        if not _REPOSITORY.match(rest):
            raise ConfigError(
                f"image {image!r} has an invalid repository {rest!r}",
                "repository names are lowercase letters, digits and the separators "
                "'.', '_', '-' and '/'",
            )
        return cls(registry=registry, repository=rest, digest=digest, tag=tag)

    @property
    def api_host(self) -> str:
        """Where the distribution API is served: Docker Hub's API has its own host name."""
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def hostname(self) -> str:
        """The host without port or IPv6 brackets."""
        host = self.registry
        if host.startswith("["):
            return host[1 : host.find("]")]
        return host.rsplit(":", 1)[0] if host.count(":") == 1 else host

    def __str__(self) -> str:
        tag = f":{self.tag}" if self.tag else ""
        return f"{self.registry}/{self.repository}{tag}@{self.digest}"


def is_loopback(hostname: str) -> bool:
    """``localhost`` or a loopback IP: traffic never leaves the node, so no TLS is expected."""
    if hostname.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False


def scheme_for(ref: ImageReference, insecure_registries: Iterable[str]) -> str:
    """``http`` for loopback and ``--insecure-registry`` hosts, ``https`` for all others."""
    insecure = {entry.lower() for entry in insecure_registries}
    if is_loopback(ref.hostname) or ref.registry.lower() in insecure:
        return "http"
    return "https"


def check_insecure_registries(values: Iterable[str]) -> frozenset[str]:
    """Validate ``--insecure-registry`` entries: bare ``HOST:PORT`` (or ``HOST``), no scheme."""
    checked = set()
    for raw in values:
        value = raw.strip()
        if not value:
            continue
        if "://" in value or "/" in value or "@" in value or " " in value:
            raise ConfigError(
                f"--insecure-registry takes HOST:PORT, got {raw!r}",
                "set --insecure-registry / webhook.insecureRegistries to e.g. "
                "'registry.internal:5000' (no scheme, no path)",
            )
        checked.add(value.lower())
    return frozenset(checked)


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """``Bearer realm="…",service="…",scope="…"`` → ``("bearer", {realm, service, scope})``."""
    scheme, _, params = header.strip().partition(" ")
    found = {
        match.group(1).lower(): match.group(2) if match.group(2) is not None else match.group(3)
        for match in _CHALLENGE_PARAM.finditer(params)
    }
    return scheme.lower(), found


async def fetch_manifest(
    ref: ImageReference,
    *,
    session: aiohttp.ClientSession,
    insecure_registries: Iterable[str] = (),
) -> dict[str, Any]:
    """The manifest (usually the image index) at ``ref.digest``, verified against the digest.

    Unbounded in time by itself: the caller wraps the whole resolution in ``asyncio.timeout``.
    """
    scheme = scheme_for(ref, insecure_registries)
    url = f"{scheme}://{ref.api_host}/v2/{ref.repository}/manifests/{ref.digest}"
    headers = {"Accept": MANIFEST_ACCEPT}
    status, body, challenge = await _get(session, url, headers, ref)
    if status == 401 and challenge:
        token = await _anonymous_token(session, challenge, ref)
        headers["Authorization"] = f"Bearer {token}"
        status, body, challenge = await _get(session, url, headers, ref)
    if status != 200:
        raise RegistryError(_status_message(status, body, ref), _status_fix(status))
    actual = hashlib.sha256(body).hexdigest()
    if f"sha256:{actual}" != ref.digest:
        raise RegistryError(
            f"{ref.registry} returned a manifest for {ref.repository}@{ref.digest} whose sha256 "
            f"is {actual}: it is not the pinned content",
            "check for a proxy or mirror rewriting manifests between the webhook and the registry",
        )
    try:
        decoded = json.loads(body)
    except ValueError as err:
        raise RegistryError(f"the manifest of {ref} is not JSON: {err}") from err
    if not isinstance(decoded, dict):
        raise RegistryError(f"the manifest of {ref} is not a JSON object")
    return decoded


async def _get(
    session: aiohttp.ClientSession,
    url: str,
    headers: Mapping[str, str],
    ref: ImageReference,
) -> tuple[int, bytes, str]:
    """One GET: status, body (bounded), and the ``WWW-Authenticate`` header if any."""
    try:
        async with session.get(url, headers=headers) as response:
            body = await _read_bounded(response, f"the manifest of {ref}")
            return response.status, body, response.headers.get("WWW-Authenticate", "")
    except (aiohttp.ClientError, TimeoutError, OSError) as err:
        raise RegistryError(
            f"cannot reach registry {ref.registry} ({url.split('://')[0]}): {_describe(err)}",
            f"check that the webhook can reach {ref.api_host}; a registry that serves plain "
            "HTTP needs --insecure-registry HOST:PORT",
        ) from err


async def _anonymous_token(
    session: aiohttp.ClientSession,
    challenge: str,
    ref: ImageReference,
) -> str:
    """Answer a ``Bearer`` challenge with an anonymous pull token from its realm."""
    scheme, params = parse_challenge(challenge)
    realm = params.get("realm", "")
    if scheme != "bearer" or not realm.startswith(("https://", "http://")):
        raise RegistryError(
            f"registry {ref.registry} requires credentials ({scheme or 'unknown'} "
            f"authentication) to read {ref.repository}; wspin reads pins anonymously",
            "make the image publicly readable, or pin the hashes with the "
            "--<artifact>-binary-sha256-amd64/-arm64 flags",
        )
    query = {"scope": params.get("scope") or f"repository:{ref.repository}:pull"}
    if params.get("service"):
        query["service"] = params["service"]
    try:
        async with session.get(realm, params=query) as response:
            body = await _read_bounded(response, "the token response")
            status = response.status
    except (aiohttp.ClientError, TimeoutError, OSError) as err:
        raise RegistryError(
            f"cannot reach the token service {realm} of {ref.registry}: {_describe(err)}",
            f"check that the webhook can reach the token service of {ref.registry}",
        ) from err
    if status != 200:
        raise RegistryError(
            f"the token service {realm} of {ref.registry} refused an anonymous token "
            f"for {query['scope']} (HTTP {status})",
            "make the image publicly readable, or pin the hashes manually",
        )
    try:
        decoded = json.loads(body)
    except ValueError:
        decoded = None
    # Docker's token spec names it "token"; OAuth2-style services answer "access_token".
    token = (
        decoded.get("token") or decoded.get("access_token") if isinstance(decoded, dict) else None
    )
    if not isinstance(token, str) or not token:
        raise RegistryError(
            f"the token service {realm} of {ref.registry} answered without a token",
            "check the registry's token service",
        )
    return token


async def _read_bounded(response: aiohttp.ClientResponse, what: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_MANIFEST_BYTES:
            raise RegistryError(
                f"{what} is larger than {MAX_MANIFEST_BYTES} bytes; refusing to read it",
                "check that the reference names an image index",
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _status_message(status: int, body: bytes, ref: ImageReference) -> str:
    detail = ""
    try:
        errors = json.loads(body).get("errors") or []
        if errors and isinstance(errors[0], dict):
            detail = f": {errors[0].get('code', '')} {errors[0].get('message', '')}".rstrip()
    except (ValueError, AttributeError):
        pass
    if status == 401:
        return (
            f"registry {ref.registry} refused an anonymous read of {ref.repository} "
            f"(HTTP 401{detail})"
        )
    if status == 404:
        return (
            f"registry {ref.registry} has no manifest {ref.repository}@{ref.digest} "
            f"(HTTP 404{detail})"
        )
    return (
        f"registry {ref.registry} answered HTTP {status} for {ref.repository}@{ref.digest}{detail}"
    )


def _status_fix(status: int) -> str:
    if status == 401:
        return "make the image publicly readable, or pin the hashes manually"
    if status == 404:
        return "check the image reference: repository and digest must exist in that registry"
    return "retry later or check the registry's health"


def _describe(err: BaseException) -> str:
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
