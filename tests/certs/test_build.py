"""Certificate building with a fixed clock: names, key usages, lifetimes, PEM checks."""

from __future__ import annotations

import datetime
from typing import TypeVar

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from certs.build import (
    BACKDATE,
    CertificateError,
    issue_serving,
    load_certificates,
    load_key_pair,
    new_ca,
    renew_at,
    service_dns_names,
    signed_by,
)
from tests.certs.conftest import NAMESPACE, NOW, SERVICE

DAY = datetime.timedelta(days=1)


E = TypeVar("E", bound=x509.ExtensionType)


def ext(cert: x509.Certificate, kind: type[E]) -> x509.Extension[E]:
    return cert.extensions.get_extension_for_class(kind)


def test_service_dns_names_are_the_four_forms_the_api_server_may_dial() -> None:
    assert service_dns_names("hook", "ns") == [
        "hook",
        "hook.ns",
        "hook.ns.svc",
        "hook.ns.svc.cluster.local",
    ]


def test_ca_is_ecdsa_p256_valid_ten_years_from_the_fixed_clock() -> None:
    ca = new_ca(NOW)
    assert isinstance(ca.key, ec.EllipticCurvePrivateKey)
    assert isinstance(ca.key.curve, ec.SECP256R1)
    assert ca.not_before == NOW - BACKDATE
    assert ca.not_after == NOW + 3650 * DAY


def test_ca_may_sign_leaves_only() -> None:
    cert = new_ca(NOW).cert
    constraints = ext(cert, x509.BasicConstraints)
    assert constraints.critical
    assert constraints.value == x509.BasicConstraints(ca=True, path_length=0)
    usage = ext(cert, x509.KeyUsage)
    assert usage.critical
    assert usage.value.key_cert_sign and usage.value.crl_sign
    assert cert.issuer == cert.subject


def test_serving_certificate_carries_the_service_names_and_lasts_one_year() -> None:
    ca = new_ca(NOW)
    leaf = issue_serving(ca, service_dns_names(SERVICE, NAMESPACE), NOW)
    san = ext(leaf.cert, x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        "wspin-webhook",
        "wspin-webhook.wspin-system",
        "wspin-webhook.wspin-system.svc",
        "wspin-webhook.wspin-system.svc.cluster.local",
    ]
    assert leaf.not_before == NOW - BACKDATE
    assert leaf.not_after == NOW + 365 * DAY
    assert isinstance(leaf.key, ec.EllipticCurvePrivateKey)
    assert isinstance(leaf.key.curve, ec.SECP256R1)


def test_serving_certificate_is_a_server_auth_leaf_signed_by_the_ca() -> None:
    ca = new_ca(NOW)
    leaf = issue_serving(ca, ["hook.ns.svc"], NOW).cert
    assert ext(leaf, x509.BasicConstraints).value.ca is False
    assert ext(leaf, x509.BasicConstraints).critical
    usage = ext(leaf, x509.KeyUsage)
    assert usage.critical
    assert usage.value.digital_signature
    assert not usage.value.key_cert_sign
    assert list(ext(leaf, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert signed_by(leaf, ca.cert)
    assert not signed_by(leaf, new_ca(NOW).cert)  # same subject name, different key


def test_serving_certificate_never_outlives_its_ca() -> None:
    ca = new_ca(NOW, lifetime=100 * DAY)
    leaf = issue_serving(ca, ["hook"], NOW)
    assert leaf.not_after == ca.not_after == NOW + 100 * DAY


def test_renewal_falls_due_after_two_thirds_of_the_lifetime() -> None:
    ca = new_ca(NOW, lifetime=300 * DAY)
    start = NOW - BACKDATE
    assert renew_at(ca.cert) == start + (NOW + 300 * DAY - start) * 2 / 3


def test_times_must_be_timezone_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        new_ca(NOW.replace(tzinfo=None))


def test_a_leaf_needs_a_name() -> None:
    with pytest.raises(CertificateError, match="at least one DNS name"):
        issue_serving(new_ca(NOW), [], NOW)


def test_key_pair_round_trips_through_pem_with_the_chain_after_the_leaf() -> None:
    ca = new_ca(NOW)
    leaf = issue_serving(ca, ["hook"], NOW)
    pair, chain = load_key_pair(leaf.cert_pem + ca.cert_pem, leaf.key_pem, "tls.crt")
    assert pair.cert == leaf.cert
    assert chain == [ca.cert_pem]


def test_a_key_of_another_certificate_is_rejected() -> None:
    ca = new_ca(NOW)
    leaf = issue_serving(ca, ["hook"], NOW)
    with pytest.raises(CertificateError, match=r"tls\.crt key does not belong"):
        load_key_pair(leaf.cert_pem, ca.key_pem, "tls.crt")


@pytest.mark.parametrize(
    ("cert_pem", "key_pem", "message"),
    [
        (b"", b"", "tls.crt certificate holds no readable PEM certificate"),
        (b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", b"", "no readable"),
        (None, b"not a key", "not a readable unencrypted PEM private key"),
    ],
)
def test_unreadable_pem_names_the_part(
    cert_pem: bytes | None, key_pem: bytes, message: str
) -> None:
    ca = new_ca(NOW)
    with pytest.raises(CertificateError, match=message):
        load_key_pair(ca.cert_pem if cert_pem is None else cert_pem, key_pem, "tls.crt")


# A 1024-bit DSA key (openssl gendsa): loading one warns on no cryptography release, naming
# the DSA types does from 51 on, so the code under test must refuse it without naming them.
DSA_KEY_PEM = b"""-----BEGIN PRIVATE KEY-----
MIIBWwIBADCCATMGByqGSM44BAEwggEmAoGBANsVnz5qxkReM0Idz8y8QL/NRWVa
MSE0XERd9okbfwEpTraGcq85NUkr2hgb1oSPArgeLVwnrKm/i6+ZqKwrxx6RkCgL
cUx+tqykSMZubB/SrbGxa17qp2RvZrlxSMoQBQNyS6+4Sl0fi4hb6Oa3OVUQjrRk
CZygYdU/ab7Z6IJPAh0A1AfjcrpDNfoIrQzem90dF/qa4gKA2i09yw8fzwKBgETy
x830p3WL6hnurjxAz1OzLpAQdEi/ZfMHEUhvuolvsdB5KeCqySAxsOqw/vl3B/rL
GD8yRUmzyrGczVF9L3+PKwc2e4/4m7aU+TCPK3ZDfYsq9iZTsRJwf8CS8FZJwVZm
RteZnFWKyN+ayu+khErdCdF5E0zsDvnOMWz+nq0fBB8CHQCDoIWAVOxF19BtvC/L
bJY98/+taAkeN2wbYXsv
-----END PRIVATE KEY-----
"""


def test_a_dsa_key_is_refused_naming_the_key_types_served(recwarn: pytest.WarningsRecorder) -> None:
    with pytest.raises(CertificateError, match=r"tls\.key key is \w*DSA\w*, not an ECDSA, RSA"):
        load_key_pair(new_ca(NOW).cert_pem, DSA_KEY_PEM, "tls.key")
    assert [str(w.message) for w in recwarn] == []


def test_rsa_keys_from_other_issuers_are_accepted() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "rsa")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(NOW)
        .not_valid_after(NOW + DAY)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    assert load_key_pair(pem, key_pem, "tls.crt")[0].cert == cert


def test_bundles_load_every_certificate() -> None:
    first, second = new_ca(NOW), new_ca(NOW)
    assert load_certificates(first.cert_pem + second.cert_pem, "bundle") == [
        first.cert,
        second.cert,
    ]
