"""An anonymous, read-only OCI distribution client: fetch one manifest by its pinned digest.

The only registry traffic wspin makes is at start: read the image index of each delivered
artifact to learn its per-arch pins (``webhook.pins``). So this client does one
thing, a digest-pinned ``GET /v2/<repo>/manifests/sha256:…``, and does it the way container
runtimes do:

- references are normalised like Docker's (``ubuntu`` → ``docker.io/library/ubuntu``, served
  by ``registry-1.docker.io``); a ``:tag`` before the digest is accepted and ignored;
- loopback registries (``localhost``, ``127.0.0.1``, ``::1``) and the ``--insecure-registry``
  entries are spoken to over plain HTTP, every other registry over HTTPS only;
- a ``401`` with a ``Bearer`` challenge is answered by asking the challenge's realm for an
  anonymous token and retrying once; tokens are never logged or put in an error;
- redirects (to blob storage or a CDN) are followed by hand, so the plain-HTTP rule holds for
  every hop and for the token realm too, the token never leaves the registry's origin, and a
  presigned query string is passed on byte for byte and never shown in an error;
- the body's sha256 must equal the pinned digest, so a registry (or a proxy in between)
  cannot hand out different annotations for the digest the pods will run.

Every failure is a ``RegistryError``: the caller may fall back to its cache for it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from yarl import URL

from webhook.reference import ImageReference, authority_of, plain_http_allowed, scheme_for
from wspin.core.errors import WspinError

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

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5
"""Hops followed per request: a registry may hand a read to blob storage or a CDN, which
takes one or two; more than this is a loop."""

# One item of a WWW-Authenticate header (RFC 7235 §4.1): an auth-param ``name=value`` (value a
# token or a quoted string with backslash escapes), or a bare token that starts a challenge.
_CHALLENGE_ITEM = re.compile(
    r'[\s,]*([!#$%&\'*+.^_`|~0-9A-Za-z-]+)(?:\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*)))?'
)
_QUOTED_PAIR = re.compile(r"\\(.)")


class RegistryError(WspinError):
    """Reading the manifest failed: unreachable, refused, not found, or not the pinned bytes."""


def parse_challenges(header: str) -> list[tuple[str, dict[str, str]]]:
    """Every challenge of one header, in order: ``Basic realm="x", Bearer realm="…",…`` →
    ``[("basic", {realm}), ("bearer", {realm, …})]``; schemes and names lowercased."""
    found: list[tuple[str, dict[str, str]]] = []
    for match in _CHALLENGE_ITEM.finditer(header):
        name, quoted, bare = match.groups()
        if quoted is None and bare is None:
            found.append((name.lower(), {}))
        elif found:
            value = _QUOTED_PAIR.sub(r"\1", quoted) if quoted is not None else bare
            found[-1][1][name.lower()] = value
    return found


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """``Bearer realm="…",service="…",scope="…"`` → ``("bearer", {realm, service, scope})``:
    the first challenge of the header (``("", {})`` when there is none)."""
    challenges = parse_challenges(header)
    return challenges[0] if challenges else ("", {})


async def fetch_manifest(
    ref: ImageReference,
    *,
    session: aiohttp.ClientSession,
    insecure_registries: Iterable[str] = (),
) -> dict[str, Any]:
    """The manifest (usually the image index) at ``ref.digest``, verified against the digest.

    Unbounded in time by itself: the caller wraps the whole resolution in ``asyncio.timeout``.
    """
    insecure = frozenset(entry.lower() for entry in insecure_registries)
    scheme = scheme_for(ref, insecure)
    url = URL(f"{scheme}://{ref.api_host}/v2/{ref.repository}/manifests/{ref.digest}")
    headers = {"Accept": MANIFEST_ACCEPT}
    answer = await _get(session, url, headers, ref, insecure, f"the manifest of {ref}", True)
    if answer.status == 401 and (challenge := _bearer_challenge(answer.challenges)) is not None:
        token = await _anonymous_token(session, challenge, ref, insecure)
        headers["Authorization"] = f"Bearer {token}"
        answer = await _get(session, url, headers, ref, insecure, f"the manifest of {ref}", True)
    if answer.status == 401 and answer.challenges and _bearer_challenge(answer.challenges) is None:
        scheme_name = parse_challenge(answer.challenges[0])[0] or "unknown"
        raise RegistryError(
            f"registry {ref.registry} requires credentials ({scheme_name} authentication) "
            f"to read {ref.repository}; wspin reads pins anonymously",
            _CREDENTIALS_FIX,
        )
    if answer.status != 200:
        raise RegistryError(
            _status_message(answer.status, answer.body, ref), _status_fix(answer.status)
        )
    actual = hashlib.sha256(answer.body).hexdigest()
    if f"sha256:{actual}" != ref.digest:
        raise RegistryError(
            f"{ref.registry} returned a manifest for {ref.repository}@{ref.digest} whose sha256 "
            f"is {actual}: it is not the pinned content",
            "check for a proxy or mirror rewriting manifests between the webhook and the registry",
        )
    try:
        decoded = json.loads(answer.body)
    except ValueError as err:
        raise RegistryError(f"the manifest of {ref} is not JSON: {err}") from err
    if not isinstance(decoded, dict):
        raise RegistryError(f"the manifest of {ref} is not a JSON object")
    return decoded


_CREDENTIALS_FIX = (
    "make the image publicly readable, or pin the hashes with the "
    "--<artifact>-binary-sha256-amd64/-arm64 flags"
)


@dataclass(frozen=True)
class _Answer:
    status: int
    body: bytes
    challenges: tuple[str, ...]
    """Every ``WWW-Authenticate`` header: a registry may offer Basic and Bearer side by side."""


async def _get(
    session: aiohttp.ClientSession,
    url: URL,
    headers: Mapping[str, str],
    ref: ImageReference,
    insecure: frozenset[str],
    what: str,
    to_registry: bool = False,
) -> _Answer:
    """One GET, following up to ``MAX_REDIRECTS`` redirects by hand.

    aiohttp would follow them itself, but also from HTTPS to plain HTTP on any host; here
    every hop must pass the plain-HTTP rule, the ``Authorization`` header is dropped as soon
    as a hop leaves the first origin, and the ``Location`` is used exactly as sent (presigned
    blob URLs break when their query is re-quoted).
    """
    hop_headers = dict(headers)
    for hops in range(MAX_REDIRECTS + 1):
        _require_allowed_scheme(url, insecure, ref, what, redirected=hops > 0)
        try:
            async with session.get(url, headers=hop_headers, allow_redirects=False) as response:
                location = response.headers.get("Location")
                if response.status not in REDIRECT_STATUSES or not location:
                    body = await _read_bounded(response, what)
                    challenges = tuple(response.headers.getall("WWW-Authenticate", ()))
                    return _Answer(response.status, body, challenges)
            target = url.join(URL(location, encoded=True))
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as err:
            raise _unreachable(url, ref, err, what, to_registry and hops == 0) from err
        if target.origin() != url.origin():
            hop_headers.pop("Authorization", None)
        url = target
    raise RegistryError(
        f"registry {ref.registry} redirected {what} more than {MAX_REDIRECTS} times",
        "check the registry's configuration: its redirects loop",
    )


def _require_allowed_scheme(
    url: URL, insecure: frozenset[str], ref: ImageReference, what: str, *, redirected: bool
) -> None:
    where = _redacted(url)
    if url.scheme == "https" or (url.scheme == "http" and plain_http_allowed(url, insecure)):
        return
    if url.scheme != "http":
        raise RegistryError(
            f"registry {ref.registry} sent {what} to {where}, which is not an HTTP(S) URL",
            "check the registry's configuration",
        )
    authority = authority_of(url)
    via = "redirected" if redirected else "sent"
    raise RegistryError(
        f"registry {ref.registry} {via} {what} to plain-HTTP host {authority}; plain HTTP is "
        "only spoken to loopback registries and --insecure-registry hosts",
        f"serve {authority} over HTTPS, or trust it with --insecure-registry {authority}",
    )


def _unreachable(
    url: URL, ref: ImageReference, err: BaseException, what: str, to_registry: bool
) -> RegistryError:
    if to_registry:
        return RegistryError(
            f"cannot reach registry {ref.registry} ({url.scheme}): {_describe(err, url)}",
            f"check that the webhook can reach {ref.api_host}; a registry that serves plain "
            "HTTP needs --insecure-registry HOST:PORT",
        )
    return RegistryError(
        f"cannot reach {_redacted(url)} for {what} of registry {ref.registry}: "
        f"{_describe(err, url)}",
        f"check that the webhook can reach {authority_of(url)}",
    )


def _bearer_challenge(headers: tuple[str, ...]) -> dict[str, str] | None:
    """The parameters of the first Bearer challenge across every header, if any."""
    for header in headers:
        for scheme, params in parse_challenges(header):
            if scheme == "bearer":
                return params
    return None


async def _anonymous_token(
    session: aiohttp.ClientSession,
    params: Mapping[str, str],
    ref: ImageReference,
    insecure: frozenset[str],
) -> str:
    """Answer a ``Bearer`` challenge with an anonymous pull token from its realm."""
    try:
        realm = URL(params.get("realm", ""))
    except ValueError:
        realm = URL()
    if realm.scheme not in ("http", "https") or not realm.host:
        raise RegistryError(
            f"registry {ref.registry} answered with a Bearer challenge without a usable realm",
            _CREDENTIALS_FIX,
        )
    scope = params.get("scope") or f"repository:{ref.repository}:pull"
    query = {"scope": scope}
    if service := params.get("service"):
        query["service"] = service
    answer = await _get(session, realm.extend_query(query), {}, ref, insecure, "the token request")
    where = _redacted(realm)
    if answer.status != 200:
        raise RegistryError(
            f"the token service {where} of {ref.registry} refused an anonymous token "
            f"for {scope} (HTTP {answer.status})",
            _CREDENTIALS_FIX,
        )
    try:
        decoded = json.loads(answer.body)
    except ValueError:
        decoded = None
    # Docker's token spec names it "token"; OAuth2-style services answer "access_token".
    token = (
        decoded.get("token") or decoded.get("access_token") if isinstance(decoded, dict) else None
    )
    if not isinstance(token, str) or not token:
        raise RegistryError(
            f"the token service {where} of {ref.registry} answered without a token",
            "check the registry's token service",
        )
    return token


async def _read_bounded(response: aiohttp.ClientResponse, what: str) -> bytes:
    too_large = RegistryError(
        f"{what} is larger than {MAX_MANIFEST_BYTES} bytes; refusing to read it",
        "check that the reference names an image index",
    )
    if (response.content_length or 0) > MAX_MANIFEST_BYTES:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_MANIFEST_BYTES:
            raise too_large
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


def _redacted(url: URL) -> str:
    """``scheme://host[:port]/path``: a presigned query string is a credential."""
    return str(url.with_query(None).with_fragment(None).with_user(None))


def _describe(err: BaseException, url: URL) -> str:
    text = str(err)
    for secret in (str(url), url.raw_query_string, url.query_string):
        if secret:
            text = text.replace(secret, _redacted(url) if secret == str(url) else "…")
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
