"""Digest-pinned image references, and which registries may be spoken to over plain HTTP.

Pure (no I/O): ``ImageReference.parse`` splits ``[registry/]repo[:tag]@sha256:<hex>`` the way
Docker normalises names, and the plain-HTTP rule (loopback hosts and ``--insecure-registry``
entries only) is decided here for the registry, for each redirect hop and for a token realm
alike, so the client in ``webhook.registry`` cannot apply it in two different ways.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

from yarl import URL

from wspin.core.errors import ConfigError

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
_DOCKER_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_REPOSITORY = re.compile(
    r"^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$"
)
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


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


def authority_of(url: URL) -> str:
    """``host[:port]`` as an ``--insecure-registry`` entry would spell it."""
    host = url.host or ""
    name = f"[{host}]" if ":" in host else host
    return f"{name}:{url.explicit_port}" if url.explicit_port else name


def plain_http_allowed(url: URL, insecure_registries: Iterable[str]) -> bool:
    """The same rule as ``scheme_for``, for a URL a registry handed us (redirect, realm)."""
    insecure = {entry.lower() for entry in insecure_registries}
    return is_loopback(url.host or "") or authority_of(url).lower() in insecure


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
