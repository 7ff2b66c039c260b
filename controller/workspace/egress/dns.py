"""Resolving declared egress domains to addresses, with the records' TTL.

The egress policy (``controller.workspace.egress.policy``) lists addresses for clusters without an
FQDN-aware CNI, so it must know how long each answer holds; the standard library's resolver
hides TTLs, dnspython's asynchronous resolver reports them. Answers are bounded
(``MAX_ADDRESSES``) and a failed lookup resolves to no addresses with a short retry, never an
exception, so one bad name cannot stop a Workspace's reconcile.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final, Protocol

import dns.asyncresolver
import dns.exception
import dns.resolver

from controller.workspace.egress.policy import MAX_ADDRESSES_PER_DOMAIN, Resolution

log = logging.getLogger("controller.dns")

# A name that does not resolve now is tried again soon, not at the negative-cache TTL.
FAILURE_TTL: Final = 30.0
LOOKUP_TIMEOUT: Final = 5.0


class Resolver(Protocol):
    """What the Workspace reconciler needs: one domain in, its addresses and TTL out."""

    async def resolve(self, domain: str) -> Resolution: ...


class DnsResolver:
    """A and AAAA lookups through the pod's configured name servers."""

    def __init__(
        self, resolver: dns.asyncresolver.Resolver | None = None, timeout: float = LOOKUP_TIMEOUT
    ) -> None:
        self._resolver = resolver if resolver is not None else dns.asyncresolver.Resolver()
        self._resolver.lifetime = timeout

    async def resolve(self, domain: str) -> Resolution:
        answers = await asyncio.gather(self._lookup(domain, "A"), self._lookup(domain, "AAAA"))
        addresses = tuple(a for found, _ in answers for a in found)[:MAX_ADDRESSES_PER_DOMAIN]
        ttls = [ttl for found, ttl in answers if found]
        return Resolution(addresses, min(ttls) if ttls else FAILURE_TTL)

    async def _lookup(self, domain: str, rdtype: str) -> tuple[list[str], float]:
        try:
            # Absolute: the controller pod's search domains must never turn a declared
            # "kubernetes.default" into the cluster's own Service.
            answer = await self._resolver.resolve(domain, rdtype, search=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer, dns.resolver.NoNameservers):
            return [], FAILURE_TTL
        except dns.exception.DNSException as err:
            log.debug("egress domain %s %s lookup failed: %s", domain, rdtype, err)
            return [], FAILURE_TTL
        ttl = float(answer.rrset.ttl) if answer.rrset is not None else FAILURE_TTL
        return [rdata.to_text() for rdata in answer], ttl
