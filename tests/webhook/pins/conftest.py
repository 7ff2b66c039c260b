"""Fixtures for the pin tests: a real registry with release-shaped image indexes.

``oci_registry`` (session) starts ``docker-registry`` on loopback and pushes one repository,
``wspin/release``, holding two per-arch images and several indexes over them that differ
only in their annotations. ``extra_registry`` starts another registry process over the same
storage (for outages: stop it mid-test). ``token_registry`` starts one with ``auth: token``,
so the real registry issues the Bearer challenge, and an aiohttp token service on loopback
that hands out anonymous pull tokens signed with a test-generated key. ``renamed_session`` is
a client session that resolves every host name to 127.0.0.1, so a loopback server can stand
in for a registry with a real (non-loopback) name.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import secrets
import socket
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

from tests.webhook.pins.registry_server import (
    AGENTD_ONLY,
    DOCKER_LIST,
    OPENCODE_ONLY,
    PINS,
    REPOSITORY,
    OciRegistry,
    Pusher,
    RegistryProcess,
    TokenRegistry,
)
from wspin.core.contract import AGENTD, OPENCODE


@pytest.fixture(scope="session")
def oci_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OciRegistry]:
    workdir = tmp_path_factory.mktemp("registry")
    storage = workdir / "storage"
    storage.mkdir()
    process = RegistryProcess(storage, workdir).start()
    try:
        push = Pusher(process.host)
        children = push.platform_manifests(REPOSITORY)
        version = {"dev.llmsafespaces/version": "1.2.0"}
        images = {
            "release": push.index(REPOSITORY, "v1.2.0", children, {**PINS, **version}),
            "agentd-only": push.index(REPOSITORY, "agentd-only", children, AGENTD_ONLY),
            "opencode-only": push.index(REPOSITORY, "opencode-only", children, OPENCODE_ONLY),
            "bare": push.index(REPOSITORY, "bare", children, version),
            "malformed": push.index(
                REPOSITORY,
                "malformed",
                children,
                {
                    AGENTD.index_annotation("amd64"): "A" * 64,
                    AGENTD.index_annotation("arm64"): "b" * 64,
                    OPENCODE.index_annotation("amd64"): "abc",
                    OPENCODE.index_annotation("arm64"): "d" * 64,
                },
            ),
            "docker-list": push.index(
                REPOSITORY, "docker-list", children, {**PINS, **version}, DOCKER_LIST
            ),
        }
        yield OciRegistry(process.host, storage, images)
    finally:
        process.stop()


@pytest.fixture
def dead_registry() -> Iterator[str]:
    """host:port of a bound, never-listening socket: every connection is refused."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{held.getsockname()[1]}"


@pytest.fixture
def extra_registry(oci_registry: OciRegistry, tmp_path: Path) -> Iterator[RegistryProcess]:
    """A second registry process serving the same content; tests may stop it (an outage)."""
    process = RegistryProcess(oci_registry.storage, tmp_path).start()
    try:
        yield process
    finally:
        process.stop()


# -- the token service ----------------------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class TokenIssuer:
    """Signs distribution-style JWTs (ES256, certificate in ``x5c``) for anonymous pulls."""

    service: str = "wspin-test-registry"
    issuer: str = "wspin-test-token-service"
    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )

    def __post_init__(self) -> None:
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "wspin test token signer")])
        now = dt.datetime.now(dt.UTC)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    def bundle_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def token(self, access: list[dict[str, Any]]) -> str:
        der = self.certificate.public_bytes(serialization.Encoding.DER)
        header = {"typ": "JWT", "alg": "ES256", "x5c": [base64.b64encode(der).decode()]}
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": "",
            "aud": self.service,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": secrets.token_hex(8),
            "access": access,
        }
        signing_input = (
            f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        )
        r, s = decode_dss_signature(
            self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        )
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return f"{signing_input}.{_b64url(signature)}"


@pytest.fixture
async def token_registry(oci_registry: OciRegistry, tmp_path: Path) -> AsyncIterator[TokenRegistry]:
    trusted = TokenIssuer()
    untrusted = TokenIssuer()
    state = TokenRegistry(service=trusted.service)

    async def token(request: web.Request) -> web.Response:
        state.requests.append(
            {
                "service": request.query.get("service"),
                "scope": request.query.get("scope"),
                "authorization": request.headers.get("Authorization"),
            }
        )
        kind, _, rest = request.query.get("scope", "").partition(":")
        name, _, _actions = rest.rpartition(":")
        access = [{"type": kind, "name": name, "actions": ["pull"]}] if kind else []
        value = (untrusted if state.forge else trusted).token(access)
        state.issued.append(value)
        return web.json_response({"token": value, "expires_in": 300})

    app = web.Application()
    app.router.add_get("/token", token)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    state.realm = f"http://127.0.0.1:{port}/token"
    bundle = tmp_path / "token-bundle.pem"
    bundle.write_bytes(trusted.bundle_pem())
    auth = {
        "token": {
            "realm": state.realm,
            "service": trusted.service,
            "issuer": trusted.issuer,
            "rootcertbundle": str(bundle),
        }
    }
    process = await asyncio.to_thread(
        RegistryProcess(oci_registry.storage, tmp_path, auth=auth).start
    )
    try:
        state.host = process.host
        yield state
    finally:
        await asyncio.to_thread(process.stop)
        await runner.cleanup()


# -- non-loopback names on loopback ---------------------------------------------------------


class LoopbackResolver(AbstractResolver):
    """Resolves every name to 127.0.0.1, so a non-loopback name reaches a loopback server."""

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
    connector = aiohttp.TCPConnector(resolver=LoopbackResolver())
    async with aiohttp.ClientSession(connector=connector) as client:
        yield client
