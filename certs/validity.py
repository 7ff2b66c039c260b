"""Whether a certificate and key may be served now, and why not.

A source swaps a new pair in only when ``check_pair`` accepts it; otherwise it keeps serving
the current one. Why all of these, and not only "does the key match": when the pair comes
from a Secret every replica reads, serving an expired or not-yet-valid certificate fails the
handshake on every replica at once, and with ``failurePolicy: Fail`` that stops every
workspace pod creation in the cluster. Keeping the current certificate while it is still
valid costs nothing; readiness (``pair_problem``) then reports when that one runs out.

``check_pair`` and ``pair_problem`` are pure; the sources count refusals by ``reason``.
"""

from __future__ import annotations

import datetime
from typing import Literal

from certs.build import CertificateError, KeyMismatch, KeyPair, load_key_pair

Reason = Literal["expired", "not-yet-valid", "key-mismatch", "unreadable"]


class UnusablePair(CertificateError):
    """A pair that must not be served; ``reason`` is the metric label."""

    def __init__(self, message: str, reason: Reason) -> None:
        super().__init__(message)
        self.reason: Reason = reason


def pair_problem(pair: KeyPair, now: datetime.datetime) -> tuple[Reason, str] | None:
    """Why ``pair`` cannot be served at ``now`` (outside notBefore..notAfter), or None."""
    if now < pair.not_before:
        return "not-yet-valid", (
            f"certificate is not valid before {pair.not_before.isoformat()} "
            f"(now {now.isoformat()}; is this clock or the issuer's wrong?)"
        )
    if now >= pair.not_after:
        return "expired", f"certificate expired at {pair.not_after.isoformat()}"
    return None


def check_pair(cert_pem: bytes, key_pem: bytes, what: str, now: datetime.datetime) -> KeyPair:
    """The pair, if it is readable, matches, and is valid at ``now``; else ``UnusablePair``."""
    try:
        pair, _ = load_key_pair(cert_pem, key_pem, what)
    except KeyMismatch as err:
        raise UnusablePair(str(err), "key-mismatch") from err
    except CertificateError as err:
        raise UnusablePair(str(err), "unreadable") from err
    if (problem := pair_problem(pair, now)) is not None:
        reason, message = problem
        raise UnusablePair(f"{what}: {message}", reason)
    return pair
