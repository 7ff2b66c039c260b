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
import re
from dataclasses import dataclass
from typing import Final, Literal

from wspin.core.errors import ConfigError

EgressMode = Literal["off", "networkpolicy", "cilium"]
DefaultEgress = Literal["deny", "allow"]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_ALLOWED_PORTS: Final = (443, 80)
DEFAULT_DNS_NAMESPACE: Final = "kube-system"
DEFAULT_DNS_POD_LABELS: Final = (("k8s-app", "kube-dns"),)
"""CoreDNS and kube-dns both keep kubeadm's ``k8s-app=kube-dns`` label in ``kube-system``."""
_VALUE: Final = "controller.workspaces.egress"
_DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_KEY: Final = re.compile(
    r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE: Final = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


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
    dns_namespace: str = DEFAULT_DNS_NAMESPACE
    """``--workspace-egress-dns-namespace``: the namespace of the cluster's DNS pods, the only
    pods a workspace pod may send port 53 to (with ``dns_pod_labels``). Port 53 anywhere else
    is a channel out of a default-deny workspace (a resolver the tenant runs, or DNS
    tunnelling to any address), so it is never opened to every address."""
    dns_pod_labels: tuple[tuple[str, str], ...] = DEFAULT_DNS_POD_LABELS
    """``--workspace-egress-dns-pod-labels``: the labels selecting the DNS pods there."""
    dns_addresses: tuple[Network, ...] = ()
    """``--workspace-egress-dns-addresses``: further addresses port 53 may go to, for a
    node-local DNS cache on a link-local address (``169.254.20.10/32``) that no pod selector
    can match. Default none."""


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


def _dns_namespace(value: str) -> str:
    if not _DNS_LABEL.match(value):
        raise ConfigError(
            f"--workspace-egress-dns-namespace {value!r} is not a namespace name",
            f"set --workspace-egress-dns-namespace / {_VALUE}.dns.namespace to the namespace "
            "of the cluster's DNS pods (kube-system)",
        )
    return value


def _dns_pod_labels(value: str) -> tuple[tuple[str, str], ...]:
    fix = (
        f"set --workspace-egress-dns-pod-labels / {_VALUE}.dns.podLabels to the labels of the "
        "cluster's DNS pods (k8s-app=kube-dns)"
    )
    labels: list[tuple[str, str]] = []
    for item in _items(value):
        key, sep, label = item.partition("=")
        if not sep or not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(label):
            raise ConfigError(
                f"--workspace-egress-dns-pod-labels entry {item!r} is not key=value", fix
            )
        labels.append((key, label))
    if not labels:
        # No labels would select every pod of the namespace, not the DNS pods.
        raise ConfigError("--workspace-egress-dns-pod-labels is empty", fix)
    return tuple(labels)


def egress_settings_from(
    *,
    mode: EgressMode,
    default: DefaultEgress,
    namespaces: str,
    allowed_cidrs: str,
    cluster_cidrs: str,
    ports: str,
    dns_namespace: str = DEFAULT_DNS_NAMESPACE,
    dns_pod_labels: str = "k8s-app=kube-dns",
    dns_addresses: str = "",
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
        dns_namespace=_dns_namespace(dns_namespace),
        dns_pod_labels=_dns_pod_labels(dns_pod_labels),
        dns_addresses=_networks("--workspace-egress-dns-addresses", dns_addresses, "dns.addresses"),
    )
