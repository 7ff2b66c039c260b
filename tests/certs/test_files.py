"""Certificates as files: writing them, and the file source's hot reload over real HTTPS."""

from __future__ import annotations

import asyncio
import datetime
import logging
import stat
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry

from certs.build import KeyPair, issue_serving, new_ca, service_dns_names
from certs.files import TOLERATED_FAILURES, FileSource, write_certificates
from certs.metrics import CertificateMetrics
from tests.certs.conftest import (
    NAMESPACE,
    SERVICE,
    SERVICE_HOST,
    admission_review,
    handshake,
    serve,
    trust,
)
from tests.support.clock import FakeClock
from tests.support.metrics import count
from wspin.core.errors import ConfigError


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _leaf(ca: KeyPair) -> KeyPair:
    return issue_serving(ca, service_dns_names(SERVICE, NAMESPACE), _now())


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def ca() -> KeyPair:
    return new_ca(_now())


@pytest.fixture
def files(tmp_path: Path, ca: KeyPair) -> Path:
    write_certificates(tmp_path, ca, _leaf(ca))
    return tmp_path


def _source(
    folder: Path, interval: float = 10.0, registry: CollectorRegistry | None = None
) -> FileSource:
    metrics = CertificateMetrics(registry or CollectorRegistry())
    return FileSource(folder / "tls.crt", folder / "tls.key", metrics=metrics, interval=interval)


def test_generated_files_are_the_ca_the_leaf_and_a_private_key(tmp_path: Path) -> None:
    ca = new_ca(_now())
    leaf = _leaf(ca)
    written = write_certificates(tmp_path / "out", ca, leaf)
    assert [p.name for p in written] == ["ca.crt", "tls.crt", "tls.key"]
    assert (tmp_path / "out" / "ca.crt").read_bytes() == ca.cert_pem
    assert (tmp_path / "out" / "tls.crt").read_bytes() == leaf.cert_pem
    assert (tmp_path / "out" / "tls.key").read_bytes() == leaf.key_pem
    assert _mode(tmp_path / "out" / "tls.key") == 0o600
    assert _mode(tmp_path / "out" / "tls.crt") == 0o644
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["ca.crt", "tls.crt", "tls.key"]


def test_rewriting_a_world_readable_key_file_makes_it_private(tmp_path: Path) -> None:
    key = tmp_path / "tls.key"
    key.write_bytes(b"old")
    key.chmod(0o644)
    ca = new_ca(_now())
    write_certificates(tmp_path, ca, _leaf(ca))
    assert _mode(key) == 0o600


def test_missing_files_at_start_name_the_flags(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _source(tmp_path).load_at_start()
    assert "--tls-cert-file" in str(caught.value)
    assert "No such file" in str(caught.value)


def test_a_key_that_does_not_match_at_start_is_a_config_error(files: Path, ca: KeyPair) -> None:
    (files / "tls.key").write_bytes(ca.key_pem)
    with pytest.raises(ConfigError, match="does not belong to --tls-cert-file"):
        _source(files).load_at_start()


async def test_unchanged_files_are_not_reloaded(files: Path) -> None:
    source = _source(files)
    source.load_at_start()
    assert source.healthy()
    assert await source.reload() is False


async def test_half_replaced_files_keep_the_old_certificate_until_both_are_new(
    files: Path, ca: KeyPair
) -> None:
    source = _source(files)
    source.load_at_start()
    async with serve(source) as port:
        old = await handshake(port, ca.cert_pem)
        fresh = _leaf(ca)
        (files / "tls.crt").write_bytes(fresh.cert_pem)  # the key is still the old one
        assert await source.reload() is False
        assert await handshake(port, ca.cert_pem) == old
        (files / "tls.key").unlink()  # a writer between steps
        assert await source.reload() is False
        assert await handshake(port, ca.cert_pem) == old
        (files / "tls.key").write_bytes(fresh.key_pem)
        assert await source.reload() is True
        assert await handshake(port, ca.cert_pem) == fresh.cert
        assert source.not_after() == fresh.not_after


async def test_failures_beyond_the_tolerated_few_become_warnings(
    files: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = _source(files)
    source.load_at_start()
    (files / "tls.key").unlink()
    caplog.set_level(logging.INFO, logger="wspin.certs")
    caplog.clear()
    for _ in range(TOLERATED_FAILURES + 2):
        assert await source.reload() is False
    levels = [r.levelno for r in caplog.records]
    assert levels == [logging.INFO] * TOLERATED_FAILURES + [logging.WARNING] * 2
    assert source.healthy()  # the previous certificate still serves


class RecordingConnector(aiohttp.TCPConnector):
    """Remembers, per request, the certificate of the pooled or new connection it used."""

    def __init__(self) -> None:
        super().__init__()
        self.peers: list[x509.Certificate] = []
        self.handshakes = 0
        self._seen: list[Any] = []
        """The transports seen, held so that a closed one's id is never reused for a new one."""

    async def connect(self, req: Any, traces: Any, timeout: Any) -> Any:
        connection = await super().connect(req, traces, timeout)
        transport = connection.transport
        assert transport is not None
        if not any(seen is transport for seen in self._seen):
            self._seen.append(transport)
            self.handshakes += 1
        der = transport.get_extra_info("ssl_object").getpeercert(binary_form=True)
        self.peers.append(x509.load_der_x509_certificate(der))
        return connection


async def _review(session: aiohttp.ClientSession, url: str, context: Any, **kw: Any) -> None:
    async with session.post(
        url, json=admission_review(), ssl=context, server_hostname=SERVICE_HOST, **kw
    ) as response:
        body = await response.json()
    assert response.status == 200
    assert body["response"]["allowed"] is True


async def test_replaced_files_reach_the_next_handshake_of_a_pooled_client(
    files: Path, ca: KeyPair
) -> None:
    source = _source(files, interval=0.02)
    source.load_at_start()
    task = asyncio.create_task(source.run())
    connector = RecordingConnector()
    context = trust(ca.cert_pem)
    try:
        async with serve(source) as port, aiohttp.ClientSession(connector=connector) as session:
            url = f"https://127.0.0.1:{port}/mutate-pods?timeout=10s"
            await _review(session, url, context)
            old = connector.peers[-1]
            fresh = _leaf(ca)
            write_certificates(files, ca, fresh)
            async with asyncio.timeout(5):
                while await handshake(port, ca.cert_pem) != fresh.cert:
                    await asyncio.sleep(0.01)
            # The pooled keep-alive connection keeps working with the certificate it has.
            await _review(session, url, context, headers={"Connection": "close"})
            assert (connector.handshakes, connector.peers[-1]) == (1, old)
            # The pool's next handshake gets the new certificate. Whether the closed connection
            # has left the client's pool by the next request is the client's timing, not the
            # server's: ask until a second handshake happens.
            for _ in range(20):
                await _review(session, url, context)
                if connector.handshakes == 2:
                    break
                await asyncio.sleep(0.05)
            assert (connector.handshakes, connector.peers[-1]) == (2, fresh.cert)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# -- pairs a reload must never serve ----------------------------------------------------------

DAY = datetime.timedelta(days=1)


def _rejected(registry: CollectorRegistry, reason: str) -> float:
    return count(registry, "wspin_webhook_certificate_reload_rejected_total", reason=reason)


def _bad_pair(kind: str, ca: KeyPair) -> tuple[bytes, bytes]:
    names = service_dns_names(SERVICE, NAMESPACE)
    if kind == "expired":
        leaf = issue_serving(ca, names, _now() - 10 * DAY, DAY)
    elif kind == "not-yet-valid":
        leaf = issue_serving(ca, names, _now() + 10 * DAY)
    else:  # key-mismatch: a new certificate with the old one's key
        leaf = _leaf(ca)
        return leaf.cert_pem, _leaf(ca).key_pem
    return leaf.cert_pem, leaf.key_pem


@pytest.fixture
def old_ca() -> KeyPair:
    """A CA valid from 30 days ago, so leaves issued in the past verify."""
    return new_ca(_now() - 30 * DAY)


BAD_PAIRS = ["expired", "not-yet-valid", "key-mismatch"]


@pytest.mark.parametrize("kind", BAD_PAIRS)
async def test_a_reload_to_a_bad_pair_keeps_serving_the_current_one_logs_and_counts_it(
    tmp_path: Path, old_ca: KeyPair, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    good = _leaf(old_ca)
    write_certificates(tmp_path, old_ca, good)
    registry = CollectorRegistry()
    source = _source(tmp_path, registry=registry)
    source.load_at_start()
    cert_pem, key_pem = _bad_pair(kind, old_ca)
    caplog.set_level(logging.INFO, logger="wspin.certs")
    async with serve(source) as port:
        (tmp_path / "tls.crt").write_bytes(cert_pem)
        (tmp_path / "tls.key").write_bytes(key_pem)
        for _ in range(TOLERATED_FAILURES + 1):
            assert await source.reload() is False
        assert await handshake(port, old_ca.cert_pem) == good.cert
    assert source.healthy()
    assert _rejected(registry, kind) == 1  # one bad pair, however many reloads saw it
    (last,) = [r for r in caplog.records if "not reloaded" in r.getMessage()][-1:]
    assert last.levelno == logging.WARNING
    assert last.fields["reason"] == kind  # type: ignore[attr-defined]
    assert str(tmp_path / "tls.crt") == last.fields["certFile"]  # type: ignore[attr-defined]


async def test_an_expired_pair_is_a_warning_from_the_first_reload(
    tmp_path: Path, old_ca: KeyPair, caplog: pytest.LogCaptureFixture
) -> None:
    write_certificates(tmp_path, old_ca, _leaf(old_ca))
    source = _source(tmp_path)
    source.load_at_start()
    cert_pem, key_pem = _bad_pair("expired", old_ca)
    (tmp_path / "tls.crt").write_bytes(cert_pem)
    (tmp_path / "tls.key").write_bytes(key_pem)
    caplog.set_level(logging.INFO, logger="wspin.certs")
    caplog.clear()
    assert await source.reload() is False
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "expired at" in caplog.records[0].fields["error"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kind", "names", "flag_fix"),
    [
        ("expired", ["tls.crt"], "renew the certificate"),
        ("not-yet-valid", ["tls.crt"], "clock"),
        ("key-mismatch", ["tls.key", "tls.crt"], "--tls-key-file"),
    ],
)
def test_a_bad_pair_at_start_is_a_config_error_naming_the_file_and_the_flag(
    tmp_path: Path, old_ca: KeyPair, kind: str, names: list[str], flag_fix: str
) -> None:
    cert_pem, key_pem = _bad_pair(kind, old_ca)
    (tmp_path / "tls.crt").write_bytes(cert_pem)
    (tmp_path / "tls.key").write_bytes(key_pem)
    with pytest.raises(ConfigError) as caught:
        _source(tmp_path).load_at_start()
    message = str(caught.value)
    for name in names:
        assert str(tmp_path / name) in message
    assert "--tls-cert-file" in message
    assert flag_fix in caught.value.fix


def test_readiness_covers_not_before_and_not_after(tmp_path: Path, old_ca: KeyPair) -> None:
    leaf = _leaf(old_ca)
    write_certificates(tmp_path, old_ca, leaf)
    clock = FakeClock(_now())
    source = FileSource(
        tmp_path / "tls.crt",
        tmp_path / "tls.key",
        metrics=CertificateMetrics(CollectorRegistry()),
        clock=clock,
    )
    source.load_at_start()
    assert source.problem() is None and source.healthy()
    clock.set(leaf.not_before - datetime.timedelta(seconds=1))
    assert not source.healthy()
    assert "not valid before" in (source.problem() or "")
    clock.set(leaf.not_after)
    assert not source.healthy()
    assert "expired" in (source.problem() or "")


def test_without_a_certificate_the_readiness_reason_says_so() -> None:
    source = FileSource(
        Path("/nonexistent/tls.crt"),
        Path("/nonexistent/tls.key"),
        metrics=CertificateMetrics(CollectorRegistry()),
    )
    assert source.problem() == "no serving certificate loaded"


async def test_each_distinct_bad_pair_is_counted_once(tmp_path: Path, old_ca: KeyPair) -> None:
    write_certificates(tmp_path, old_ca, _leaf(old_ca))
    registry = CollectorRegistry()
    source = _source(tmp_path, registry=registry)
    source.load_at_start()
    for _ in range(2):
        cert_pem, key_pem = _bad_pair("expired", old_ca)  # a new expired pair each time
        (tmp_path / "tls.crt").write_bytes(cert_pem)
        (tmp_path / "tls.key").write_bytes(key_pem)
        for _ in range(3):
            assert await source.reload() is False
    assert _rejected(registry, "expired") == 2
