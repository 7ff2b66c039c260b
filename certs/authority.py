"""The self-managed authority's decisions: what the Secret should hold next, and when.

Pure: ``next_step`` reads the stored state and the time and names one step; ``apply_step``
builds the state after it. The caller writes, publishes and loops, so every transition is
tested with a fixed clock and no API server.

Rotation order, and why. The API server trusts whatever ``caBundle`` the webhook
configurations carry, and each replica serves whatever the Secret holds when it last read it:

1. A leaf renewal keeps the CA, so it needs no coordination.
2. A CA rotation first adds the new CA to the bundle next to the old one (``start-ca-rotation``);
   the leaf is still signed by the old CA, which stays trusted.
3. Only once that bundle has been patched into the configurations and ``propagation`` has
   passed (every API server has seen it) is the leaf re-issued by the new CA
   (``switch-serving``). API servers report nothing back, so this wait is a time.
4. Only once every replica the webhook Service routes to reports serving that leaf
   (``certs.reports``) is the old CA dropped from the bundle (``finish-ca-rotation``). A
   replica that has not reported ``propagation`` after the leaf was issued is overdue: the
   plan says so (``overdue``, ``lagging``) and the old CA stays in, however long that takes;
   two CAs in the bundle cost nothing, a dropped one fails every request to a lagging
   replica.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, replace
from typing import Literal

from cryptography import x509

from certs.build import (
    BACKDATE,
    CA_LIFETIME,
    SERVING_LIFETIME,
    KeyPair,
    dns_names_of,
    is_ca,
    issue_serving,
    new_ca,
    renew_at,
    signed_by,
)
from certs.reports import Replicas, lagging, leaf_fingerprint
from certs.store import Stored

Step = Literal[
    "create",
    "trust-ca",
    "issue-serving",
    "publish",
    "renew-serving",
    "start-ca-rotation",
    "switch-serving",
    "finish-ca-rotation",
    "wait",
]


@dataclass(frozen=True)
class Policy:
    """How the authority issues and when it rotates."""

    dns_names: tuple[str, ...]
    """Names the serving certificate carries (the Service's four DNS forms)."""
    ca_lifetime: datetime.timedelta = CA_LIFETIME
    """Ten years by default; rotated at two thirds."""
    serving_lifetime: datetime.timedelta = SERVING_LIFETIME
    """One year by default; renewed at two thirds."""
    propagation: datetime.timedelta = datetime.timedelta(minutes=2)
    """How long a new caBundle takes to reach every API server (their webhook configuration
    informers take seconds), waited before the leaf switches CA; and how long replicas (which
    re-read the Secret every 10 s) get to report the new leaf before a held rotation is
    reported as overdue."""


@dataclass(frozen=True)
class Plan:
    step: Step
    reason: str
    wait_until: datetime.datetime | None = None
    """For ``wait``: when the next step falls due (None = only if the Secret changes, or,
    while replicas are awaited, whenever the next round looks again)."""
    lagging: tuple[str, ...] = ()
    """Replicas taking traffic that do not report serving the new leaf yet."""
    overdue: bool = False
    """Replicas have been awaited longer than ``propagation``: the old CA is held in."""


def awaiting_replicas(stored: Stored) -> bool:
    """A CA rotation has switched the leaf and waits for the replicas to serve it; only then
    does ``next_step`` need ``Replicas``."""
    ca, serving = stored.ca, stored.serving
    return (
        ca is not None
        and serving is not None
        and any(cert != ca.cert for cert in stored.bundle)
        and signed_by(serving.cert, ca.cert)
    )


def next_step(
    stored: Stored,
    now: datetime.datetime,
    policy: Policy,
    replicas: Replicas | None = None,
) -> Plan:
    """The one step the Secret needs now, or ``wait`` with the time the next one is due.

    ``replicas`` is read by the caller when ``awaiting_replicas(stored)``; None there means
    they could not be read, which holds the old CA in like a lagging replica does.
    """
    ca = stored.ca
    if ca is None or not _usable_ca(ca, now):
        what = "no CA" if ca is None else "the CA is not a usable CA"
        return Plan("create", f"{what} in the Secret")
    if ca.cert not in stored.bundle:
        return Plan("trust-ca", "the CA bundle does not contain the signing CA")
    serving = stored.serving
    if serving is None or not _usable_serving(serving, stored.bundle, now, policy):
        return Plan("issue-serving", "no usable serving certificate in the Secret")
    if not stored.published:
        return Plan("publish", "the CA bundle has not been patched into the webhooks")
    published_at = stored.published_at or now
    rotating = any(cert != ca.cert for cert in stored.bundle)
    if rotating and not signed_by(serving.cert, ca.cert):
        due = published_at + policy.propagation
        if now >= due:
            return Plan("switch-serving", "the new CA has been trusted everywhere")
        return Plan("wait", "waiting for the new CA bundle to reach every API server", due)
    if rotating:
        return _await_replicas(serving, replicas, now, policy)
    if now >= renew_at(ca.cert):
        return Plan("start-ca-rotation", "two thirds of the CA's lifetime have passed")
    if now >= renew_at(serving.cert):
        return Plan("renew-serving", "two thirds of the serving certificate's lifetime passed")
    return Plan("wait", "certificates are current", min(renew_at(ca.cert), renew_at(serving.cert)))


def apply_step(step: Step, stored: Stored, now: datetime.datetime, policy: Policy) -> Stored:
    """The state after ``step``, on the same resourceVersion (so the write is conditional).

    ``publish`` only records the time: the caller has just patched the webhooks.
    """
    names = list(policy.dns_names)
    if step == "create":
        ca = new_ca(now, policy.ca_lifetime)
        serving = _issue(ca, names, now, policy)
        return replace(stored, ca=ca, bundle=(ca.cert,), serving=serving, problems=())
    assert stored.ca is not None, f"{step} needs a CA"
    ca = stored.ca
    if step == "trust-ca":
        return replace(stored, bundle=(*_valid_cas(stored.bundle, now), ca.cert), problems=())
    if step in ("issue-serving", "renew-serving", "switch-serving"):
        return replace(stored, serving=_issue(ca, names, now, policy), problems=())
    if step == "publish":
        return replace(stored, published_sha=stored.bundle_sha, published_at=now)
    if step == "start-ca-rotation":
        fresh = new_ca(now, policy.ca_lifetime)
        return replace(stored, ca=fresh, bundle=(ca.cert, fresh.cert))
    if step == "finish-ca-rotation":
        return replace(stored, bundle=(ca.cert,))
    raise ValueError(f"nothing to apply for step {step!r}")


def _await_replicas(
    serving: KeyPair, replicas: Replicas | None, now: datetime.datetime, policy: Policy
) -> Plan:
    due = issued_at(serving) + policy.propagation
    overdue = now >= due
    if replicas is None:
        why = "which replicas serve the new certificate could not be read"
        return Plan("wait", f"keeping the old CA: {why}", None if overdue else due, (), overdue)
    if not replicas.taking_traffic:
        why = "no ready endpoint of the webhook Service was found"
        return Plan("wait", f"keeping the old CA: {why}", None if overdue else due, (), overdue)
    behind = lagging(replicas, leaf_fingerprint(serving.cert))
    if behind:
        return Plan(
            "wait",
            f"keeping the old CA: {len(behind)} replica(s) do not report serving the new "
            f"certificate yet: {', '.join(behind)}",
            None if overdue else due,
            behind,
            overdue,
        )
    return Plan(
        "finish-ca-rotation",
        f"all {len(replicas.taking_traffic)} replica(s) taking traffic serve the new certificate",
    )


def issued_at(cert: KeyPair) -> datetime.datetime:
    """When a certificate we issued was made (its ``notBefore`` is backdated)."""
    return cert.not_before + BACKDATE


def _issue(ca: KeyPair, names: list[str], now: datetime.datetime, policy: Policy) -> KeyPair:
    return issue_serving(ca, names, now, policy.serving_lifetime)


# Only expiry counts, not ``notBefore``: a replica whose clock runs behind the one that issued
# must not regenerate a CA everyone already trusts.
def _usable_ca(ca: KeyPair, now: datetime.datetime) -> bool:
    return is_ca(ca.cert) and now < ca.not_after


def _usable_serving(
    serving: KeyPair,
    bundle: tuple[x509.Certificate, ...],
    now: datetime.datetime,
    policy: Policy,
) -> bool:
    return (
        now < serving.not_after
        and sorted(dns_names_of(serving.cert)) == sorted(policy.dns_names)
        and any(signed_by(serving.cert, ca) for ca in bundle)
    )


def _valid_cas(
    bundle: tuple[x509.Certificate, ...], now: datetime.datetime
) -> tuple[x509.Certificate, ...]:
    return tuple(c for c in bundle if is_ca(c) and now < c.not_valid_after_utc)
