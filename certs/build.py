"""Pure certificate building: a CA, serving certificates it signs, PEM in and out.

No I/O, no clock: every function that needs the time takes ``now``, so tests pin it. The
keys are ECDSA P-256 (small, fast handshakes, accepted by every Kubernetes API server).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from wspin.core.errors import WspinError

CA_LIFETIME = datetime.timedelta(days=3650)
"""Ten years: the CA only signs our own serving certificates and rotates at two thirds."""
SERVING_LIFETIME = datetime.timedelta(days=365)
"""One year: renewed at two thirds, so a stuck renewal has four months to be noticed."""
BACKDATE = datetime.timedelta(minutes=5)
"""``notBefore`` sits this far in the past so a peer whose clock lags still accepts it."""
RENEW_FRACTION = 2 / 3
"""Renew once this fraction of the lifetime has passed (cert-manager's default)."""

CA_COMMON_NAME = "llmsafespaces webhook CA"

# The key types a supplied serving certificate may use. Not DSA: TLS 1.3 has no DSA
# signatures, and cryptography deprecates the type (naming it warns from version 51 on).
_SIGNING_KEYS = (
    ec.EllipticCurvePrivateKey,
    rsa.RSAPrivateKey,
    ed25519.Ed25519PrivateKey,
    ed448.Ed448PrivateKey,
)


class CertificateError(WspinError):
    """PEM data that is missing, malformed, or does not fit together."""


class KeyMismatch(CertificateError):
    """A readable certificate and a readable key that do not belong together."""


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, checked to belong together."""

    cert: x509.Certificate
    key: CertificateIssuerPrivateKeyTypes = field(compare=False, repr=False)
    """ECDSA for everything wspin generates; supplied files may carry RSA or Ed25519.
    Not compared: key objects have no equality, and the key is fixed by the certificate."""

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    @property
    def not_before(self) -> datetime.datetime:
        return self.cert.not_valid_before_utc

    @property
    def not_after(self) -> datetime.datetime:
        return self.cert.not_valid_after_utc


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server may use for the Service: it calls ``NAME.NS.svc``."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def new_ca(
    now: datetime.datetime,
    lifetime: datetime.timedelta = CA_LIFETIME,
    common_name: str = CA_COMMON_NAME,
) -> KeyPair:
    """A self-signed CA that may sign leaves only (``pathLen 0``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    start = _second(now)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - BACKDATE)
        .not_valid_after(start + lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert, key)


def issue_serving(
    ca: KeyPair,
    dns_names: list[str],
    now: datetime.datetime,
    lifetime: datetime.timedelta = SERVING_LIFETIME,
) -> KeyPair:
    """A serving certificate for ``dns_names`` signed by ``ca``.

    Its expiry is clamped to the CA's: a leaf that outlives its issuer would fail validation
    anyway, and clamping makes the renewal schedule see the real deadline.
    """
    if not dns_names:
        raise CertificateError("a serving certificate needs at least one DNS name")
    key = ec.generate_private_key(ec.SECP256R1())
    start = _second(now)
    not_after = min(start + lifetime, ca.not_after)
    ca_ski = ca.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[-1])]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return KeyPair(cert, key)


def renew_at(cert: x509.Certificate) -> datetime.datetime:
    """When two thirds of the certificate's lifetime have passed."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * RENEW_FRACTION


def is_ca(cert: x509.Certificate) -> bool:
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return False
    return constraints.ca


def signed_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    """``cert``'s signature verifies with ``issuer``'s key (names alone can repeat)."""
    if cert.issuer != issuer.subject:
        return False
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def dns_names_of(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return list(san.get_values_for_type(x509.DNSName))


def load_certificates(pem: bytes, what: str) -> list[x509.Certificate]:
    """Every certificate in a PEM bundle; ``what`` names the source in the error."""
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError as err:
        raise CertificateError(f"{what} holds no readable PEM certificate ({err})") from err
    return certs


def load_key_pair(cert_pem: bytes, key_pem: bytes, what: str) -> tuple[KeyPair, list[bytes]]:
    """The first certificate of ``cert_pem`` with its key, plus the rest of the chain as PEM.

    Raises ``CertificateError`` when the key does not match: loading a mismatched pair into
    a TLS context would break every handshake.
    """
    certs = load_certificates(cert_pem, f"{what} certificate")
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as err:
        raise CertificateError(
            f"{what} key is not a readable unencrypted PEM private key ({err})"
        ) from err
    if not isinstance(key, _SIGNING_KEYS):
        raise CertificateError(
            f"{what} key is {type(key).__name__}, not an ECDSA, RSA, Ed25519 or Ed448 key"
        )
    if certs[0].public_key() != key.public_key():
        raise KeyMismatch(f"{what} key does not belong to its certificate")
    chain = [c.public_bytes(serialization.Encoding.PEM) for c in certs[1:]]
    return KeyPair(certs[0], key), chain


def pem_bundle(certs: list[x509.Certificate]) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def fingerprint(cert: x509.Certificate) -> str:
    """Short SHA-256 fingerprint for logs (public data, safe to show)."""
    return cert.fingerprint(hashes.SHA256()).hex()[:16]


def _second(now: datetime.datetime) -> datetime.datetime:
    """X.509 times have whole seconds; truncating keeps computed deadlines exact."""
    if now.tzinfo is None:
        raise ValueError("certificate times must be timezone-aware")
    return now.astimezone(datetime.UTC).replace(microsecond=0)
