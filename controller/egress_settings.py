"""``EgressSettings``: how the controller limits workspace pods' egress, and the checks of its
flags' values (the flags are declared in ``controller.settings``).

The operator, never a tenant, decides which addresses and ports a declared domain may open: a
tenant chooses the domain, and so whatever it resolves to. ``--workspace-egress-allowed-cidrs``
names the only addresses in special-purpose ranges (and the cluster's own) a domain may reach,
``--workspace-egress-cluster-cidrs`` adds the cluster's Service and Pod ranges to what is
dropped, and ``--workspace-egress-ports`` lists the ports a Workspace may ask for.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Final, Literal

from wspin.core.errors import ConfigError

EgressMode = Literal["off", "networkpolicy", "cilium"]
DefaultEgress = Literal["deny", "allow"]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_ALLOWED_PORTS: Final = (443, 80)
_VALUE: Final = "controller.workspaces.egress"


@dataclass(frozen=True)
class EgressSettings:
    """How the controller limits workspace pods' egress (one policy per Workspace)."""

    mode: EgressMode = "off"
    """``--workspace-egress``: "networkpolicy" (address rules, re-resolved within each
    record's TTL), "cilium" (a CiliumNetworkPolicy with toFQDNs, where Cilium is installed) or
    "off" (no policy is written; the chart picks cilium or networkpolicy by itself)."""
    default: DefaultEgress = "deny"
    """``--workspace-egress-default``: a Workspace that declares no domains gets DNS and the
    platform only ("deny"), or no policy of ours at all ("allow")."""
    platform_namespaces: tuple[str, ...] = ()
    """``--workspace-egress-namespaces``: namespaces whose pods every workspace pod may reach
    (the API service, relay routers)."""
    allowed_cidrs: tuple[Network, ...] = ()
    """``--workspace-egress-allowed-cidrs``: addresses a declared domain may reach although
    they are in a dropped range (an on-premises service in a private range). Default none."""
    cluster_cidrs: tuple[Network, ...] = ()
    """``--workspace-egress-cluster-cidrs``: the cluster's Service and Pod CIDRs (and node
    ranges), dropped like loopback, link-local, private and carrier-grade ranges. Needed when
    the cluster uses public ranges; private ones are dropped anyway."""
    allowed_ports: tuple[int, ...] = DEFAULT_ALLOWED_PORTS
    """``--workspace-egress-ports``: the ports a declared domain may be reached on (a
    Workspace's ``ports`` outside it are refused and reported). Default 443 and 80."""


def _items(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _networks(flag: str, value: str | None, key: str) -> tuple[Network, ...]:
    found: list[Network] = []
    for item in _items(value):
        try:
            found.append(ipaddress.ip_network(item, strict=True))
        except ValueError as err:
            raise ConfigError(
                f"{flag} entry {item!r} is not a CIDR ({err})",
                f"set {flag} / {_VALUE}.{key} to networks like 10.20.0.0/16 or fd00:10::/64",
            ) from None
    return tuple(found)


def _ports(value: str | None) -> tuple[int, ...]:
    ports: list[int] = []
    for item in _items(value):
        if not item.isdigit() or not 0 < int(item) < 65536:
            raise ConfigError(
                f"--workspace-egress-ports entry {item!r} is not a port (1-65535)",
                f"set --workspace-egress-ports / {_VALUE}.ports to ports like 443,80",
            )
        ports.append(int(item))
    if not ports:
        raise ConfigError(
            "--workspace-egress-ports is empty: no declared domain could be reached",
            f"set --workspace-egress-ports / {_VALUE}.ports to at least one port (443)",
        )
    return tuple(dict.fromkeys(ports))


def egress_settings_from(
    *,
    mode: EgressMode,
    default: DefaultEgress,
    namespaces: str,
    allowed_cidrs: str,
    cluster_cidrs: str,
    ports: str,
) -> EgressSettings:
    """The egress flags' values (comma lists as given), checked; ConfigError names the flag
    and the Helm value."""
    return EgressSettings(
        mode=mode,
        default=default,
        platform_namespaces=tuple(_items(namespaces)),
        allowed_cidrs=_networks("--workspace-egress-allowed-cidrs", allowed_cidrs, "allowedCIDRs"),
        cluster_cidrs=_networks("--workspace-egress-cluster-cidrs", cluster_cidrs, "clusterCIDRs"),
        allowed_ports=_ports(ports),
    )
