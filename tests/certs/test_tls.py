"""Real TLS on loopback: the chain verifies with Python's ``ssl``, and the served
certificate swaps for new connections without restarting the listener."""

from __future__ import annotations

import asyncio
import datetime
import ssl
from collections.abc import AsyncIterator

import pytest

from certs.build import CertificateError, KeyPair, issue_serving, new_ca, service_dns_names
from certs.tls import ServingContext, context_for, server_context
from tests.certs.conftest import NAMESPACE, SERVICE, handshake


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()


@pytest.fixture
async def listener() -> AsyncIterator[tuple[ServingContext, int]]:
    """A bare TLS listener on the swappable context (no HTTP: the handshake is the test)."""
    serving = ServingContext()
    server = await asyncio.start_server(_echo, "127.0.0.1", 0, ssl=serving.listening)
    port = server.sockets[0].getsockname()[1]
    try:
        yield serving, port
    finally:
        server.close()
        await server.wait_closed()


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _leaf(ca: KeyPair) -> KeyPair:
    return issue_serving(ca, service_dns_names(SERVICE, NAMESPACE), _now())


@pytest.mark.parametrize("name", service_dns_names(SERVICE, NAMESPACE))
async def test_client_trusting_only_the_ca_verifies_every_service_name(
    listener: tuple[ServingContext, int], name: str
) -> None:
    serving, port = listener
    ca = new_ca(_now())
    leaf = _leaf(ca)
    await serving.load(leaf.cert_pem, leaf.key_pem, "test", _now())
    assert await handshake(port, ca.cert_pem, server_hostname=name) == leaf.cert


async def test_client_trusting_another_ca_rejects_the_certificate(
    listener: tuple[ServingContext, int],
) -> None:
    serving, port = listener
    leaf = _leaf(new_ca(_now()))
    await serving.load(leaf.cert_pem, leaf.key_pem, "test", _now())
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
        await handshake(port, new_ca(_now()).cert_pem)


async def test_a_name_outside_the_sans_fails_hostname_verification(
    listener: tuple[ServingContext, int],
) -> None:
    serving, port = listener
    ca = new_ca(_now())
    leaf = _leaf(ca)
    await serving.load(leaf.cert_pem, leaf.key_pem, "test", _now())
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        await handshake(port, ca.cert_pem, server_hostname="other.wspin-system.svc")


async def test_new_connections_get_the_swapped_certificate_on_the_same_listener(
    listener: tuple[ServingContext, int],
) -> None:
    serving, port = listener
    ca = new_ca(_now())
    first, second = _leaf(ca), _leaf(ca)
    await serving.load(first.cert_pem, first.key_pem, "test", _now())
    assert await handshake(port, ca.cert_pem) == first.cert
    await serving.load(second.cert_pem, second.key_pem, "test", _now())
    assert await handshake(port, ca.cert_pem) == second.cert
    assert serving.serves(second.cert_pem, second.key_pem)
    assert not serving.serves(first.cert_pem, first.key_pem)


async def test_a_mismatched_pair_is_refused_and_the_old_certificate_stays(
    listener: tuple[ServingContext, int],
) -> None:
    serving, port = listener
    ca = new_ca(_now())
    good, other = _leaf(ca), _leaf(ca)
    await serving.load(good.cert_pem, good.key_pem, "test", _now())
    with pytest.raises(CertificateError, match="does not belong"):
        await serving.load(other.cert_pem, good.key_pem, "test", _now())
    assert await handshake(port, ca.cert_pem) == good.cert


async def test_without_a_certificate_handshakes_fail_instead_of_hanging(
    listener: tuple[ServingContext, int],
) -> None:
    _, port = listener
    with pytest.raises((ssl.SSLError, ConnectionError)):
        async with asyncio.timeout(5):
            await handshake(port, new_ca(_now()).cert_pem)


def test_every_serving_context_refuses_client_renegotiation() -> None:
    leaf = _leaf(new_ca(_now()))
    for context in (server_context(), context_for(leaf.cert_pem, leaf.key_pem)):
        assert context.options & ssl.OP_NO_RENEGOTIATION
        assert context.minimum_version == ssl.TLSVersion.TLSv1_2
