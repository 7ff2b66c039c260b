"""``wspin webhook`` as a real process, started on a bad certificate pair: it exits 1 before
serving, naming the file and the flag, instead of starting unready."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from certs.build import issue_serving, new_ca, service_dns_names
from tests.certs.conftest import NAMESPACE, SERVICE
from tests.webhook.process import PINS, run_wspin

DAY = datetime.timedelta(days=1)


def _write(folder: Path, kind: str) -> tuple[Path, Path]:
    now = datetime.datetime.now(datetime.UTC)
    ca = new_ca(now - 30 * DAY)
    names = service_dns_names(SERVICE, NAMESPACE)
    if kind == "expired":
        leaf = issue_serving(ca, names, now - 10 * DAY, DAY)
        cert_pem, key_pem = leaf.cert_pem, leaf.key_pem
    elif kind == "not-yet-valid":
        leaf = issue_serving(ca, names, now + 10 * DAY)
        cert_pem, key_pem = leaf.cert_pem, leaf.key_pem
    else:
        cert_pem, key_pem = issue_serving(ca, names, now).cert_pem, ca.key_pem
    cert, key = folder / "serving.crt", folder / "serving.key"
    cert.write_bytes(cert_pem)
    key.write_bytes(key_pem)
    return cert, key


@pytest.mark.parametrize(
    ("kind", "says", "names_key"),
    [
        ("expired", "certificate expired at", False),
        ("not-yet-valid", "certificate is not valid before", False),
        ("key-mismatch", "does not belong to", True),
    ],
)
async def test_a_bad_pair_at_start_exits_1_naming_the_file_and_the_flag(
    tmp_path: Path, kind: str, says: str, names_key: bool
) -> None:
    cert, key = _write(tmp_path, kind)
    status, stderr = await run_wspin(
        "webhook", *PINS, "--tls-cert-file", str(cert), "--tls-key-file", str(key)
    )
    assert status == 1, stderr
    assert says in stderr
    assert f"--tls-cert-file {cert}" in stderr
    if names_key:
        assert f"--tls-key-file {key}" in stderr
    assert "Traceback" not in stderr
