"""Which resolved addresses a declared egress domain may open. Pure.

A tenant chooses the domain, and so what it resolves to: any name in a zone the tenant controls
(``127.0.0.1.nip.io``, a record of its own) can point at the API server's Service, the cloud
metadata endpoint, a node's kubelet or another tenant's pod. An address rule to such a target
would open the cluster from inside the sandbox, so an address is kept only when it is an
ordinary public unicast address outside the cluster's own ranges, or the operator named it in
``--workspace-egress-allowed-cidrs``.

Dropped: the IPv4 and IPv6 special-purpose ranges that are not globally reachable (this
network, loopback, link-local with the metadata endpoints, private and unique-local,
carrier-grade NAT, documentation, benchmarking, multicast, reserved, discard-only), IPv4 in
IPv6 forms that reach an IPv4 address by another way (v4-mapped and v4-compatible always;
NAT64 and 6to4 judged by the IPv4 address they carry; local-use NAT64 and Teredo always), the
Azure host address, and the operator's ``--workspace-egress-cluster-cidrs``. The table is
written out rather than taken from ``ipaddress``'s ``is_global``, whose answers differ between
Python releases.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from controller.egress_settings import EgressSettings, Network

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _table(*rows: tuple[str, str]) -> tuple[tuple[Network, str], ...]:
    return tuple((ipaddress.ip_network(cidr), why) for cidr, why in rows)


SPECIAL_V4: Final = _table(
    ("0.0.0.0/8", "this network"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "carrier-grade NAT"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local, where cloud metadata answers"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("192.0.2.0/24", "documentation"),
    ("192.88.99.0/24", "6to4 relay anycast"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    # Public in form, but the Azure host's own services (wire server, metadata, DNS).
    ("168.63.129.16/32", "the Azure host's services"),
)
SPECIAL_V6: Final = _table(
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::ffff:0:0/96", "IPv4-mapped"),
    ("::/96", "IPv4-compatible"),
    ("64:ff9b:1::/48", "local-use NAT64"),
    ("100::/64", "discard-only"),
    ("2001::/23", "IETF protocol assignments (Teredo included)"),
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "segment routing"),
    ("fc00::/7", "unique local, where cloud metadata answers"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
)
# IPv6 prefixes that carry an IPv4 address: the address judged is the one they reach.
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR: Final = ipaddress.IPv6Network("2002::/16")
# Everything else outside it is unallocated or reserved.
_GLOBAL_UNICAST: Final = ipaddress.IPv6Network("2000::/3")


@dataclass(frozen=True)
class Dropped:
    """A resolved address left out of the policy, and why (for the Workspace's condition)."""

    domain: str
    address: str
    reason: str

    def describe(self) -> str:
        return f"{self.domain} -> {self.address}, {self.reason}"


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a NAT64 or 6to4 address reaches, if it is one."""
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return address.sixtofour
    return None


def _allowed(address: Address, settings: EgressSettings) -> bool:
    return any(address in network for network in settings.allowed_cidrs)


def drop_reason(text: str, settings: EgressSettings) -> str | None:
    """Why the resolved address ``text`` must not become an allow rule, or None to keep it."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return "not an IP address"
    if _allowed(address, settings):
        return None
    for network in settings.cluster_cidrs:
        if address in network:
            return f"the cluster's own range {network}"
    table = SPECIAL_V4 if address.version == 4 else SPECIAL_V6
    for network, why in table:
        if address in network:
            return f"{why} ({network})"
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_v4(address)
        if embedded is not None:
            inner = drop_reason(str(embedded), settings)
            return None if inner is None else f"reaches {embedded}: {inner}"
        if address not in _GLOBAL_UNICAST:
            return f"outside IPv6 global unicast {_GLOBAL_UNICAST}"
    return None


def filter_addresses(
    domain: str, addresses: Iterable[str], settings: EgressSettings
) -> tuple[list[str], list[Dropped]]:
    """(addresses kept, addresses dropped with the reason), each list in input order."""
    kept: list[str] = []
    dropped: list[Dropped] = []
    for text in addresses:
        reason = drop_reason(text, settings)
        if reason is None:
            kept.append(text)
        else:
            dropped.append(Dropped(domain, text, reason))
    return kept, dropped


def _carried(network: ipaddress.IPv4Network) -> list[Network]:
    """The NAT64 and 6to4 ranges that reach ``network``."""
    bits = int(network.network_address)
    return [
        ipaddress.IPv6Network((int(_NAT64.network_address) | bits, 96 + network.prefixlen)),
        ipaddress.IPv6Network(
            (int(_SIX_TO_FOUR.network_address) | bits << 80, 16 + network.prefixlen)
        ),
    ]


def denied_networks(settings: EgressSettings) -> list[tuple[Network, list[Network]]]:
    """Every dropped range with the operator's allowed CIDRs inside it (the exceptions), for
    policies that deny by range (Cilium's ``egressDeny``); a range wholly allowed is left out.
    IPv4 ranges come with the NAT64 and 6to4 ranges that reach them."""
    out: list[tuple[Network, list[Network]]] = []
    v4 = [*(n for n in settings.cluster_cidrs if n.version == 4), *(n for n, _ in SPECIAL_V4)]
    ranges = [
        *settings.cluster_cidrs,
        *(n for n, _ in SPECIAL_V4),
        *(n for n, _ in SPECIAL_V6),
        *(c for n in v4 if isinstance(n, ipaddress.IPv4Network) for c in _carried(n)),
    ]
    for network in dict.fromkeys(ranges):
        if any(_within(network, allowed) for allowed in settings.allowed_cidrs):
            continue
        inside = [a for a in settings.allowed_cidrs if _within(a, network)]
        out.append((network, inside))
    return out


def _within(inner: Network, outer: Network) -> bool:
    return inner.version == outer.version and inner.subnet_of(outer)  # type: ignore[arg-type]
