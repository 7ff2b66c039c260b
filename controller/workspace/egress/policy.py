"""Per-Workspace egress policy: the workspace pod may reach DNS, the platform's own services and
the domains the Workspace declares in ``spec.networkAccess.egress``, and nothing else.

Pure: ``desired_egress_policy`` turns a Workspace, the addresses its domains resolved to and the
settings into the one policy object the controller owns for it (or None when the cluster default
is open egress and nothing is declared). Two shapes:
- with Cilium installed, a ``CiliumNetworkPolicy`` with ``toFQDNs``: Cilium's DNS proxy allows
  exactly the addresses each name resolves to for as long as the record lives, and handles
  ``*.`` patterns, which no address list can;
- otherwise a ``NetworkPolicy`` with one ``ipBlock`` per resolved address. Names are re-resolved
  within their records' TTL (``next_resolution``), so the policy follows an address change;
  a ``*.`` pattern cannot be resolved and is reported instead of silently allowed.
Kubernetes NetworkPolicies are additive: any other policy selecting the pod can only widen
what this one allows.

The tenant picks the domain, so what it resolves to is the tenant's too: an address in the
cluster's ranges, loopback, link-local (cloud metadata), private or carrier-grade space is
dropped unless the operator allows it (``egress_addresses``), and reported on the Workspace
naming the domain and the address. With Cilium, which resolves names itself, the same ranges
are denied outright (``egressDeny``) on the ports the policy opens. Declared ports outside the
operator's list are refused and reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from controller.egress_settings import EgressSettings
from controller.types import Obj
from controller.workspace.egress.addresses import Dropped, denied_networks, filter_addresses
from wspin.core.contract import (
    LABEL_APP,
    LABEL_APP_VALUE,
    LABEL_COMPONENT,
    LABEL_COMPONENT_VALUE,
    LABEL_WORKSPACE,
    LABEL_WORKSPACE_UID,
)
from wspin.core.kinds import Resource
from wspin.core.workspace import WorkspaceSpec

NETWORK_POLICIES: Final = Resource(
    "networking.k8s.io", "v1", "networkpolicies", kind="NetworkPolicy"
)
CILIUM_NETWORK_POLICIES: Final = Resource(
    "cilium.io", "v2", "ciliumnetworkpolicies", kind="CiliumNetworkPolicy"
)
# Bounds far above a real sandbox's needs; the validator refuses more domains than this.
MAX_DOMAINS: Final = 64
MAX_ADDRESSES_PER_DOMAIN: Final = 32
DEFAULT_PORTS: Final = ((443, "TCP"),)
"""A declared domain without ``ports`` is reachable on HTTPS only."""
NAMESPACE_LABEL: Final = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Resolution:
    """Addresses one domain resolved to, and for how long the answer holds (seconds)."""

    addresses: tuple[str, ...]
    ttl: float


@dataclass(frozen=True)
class EgressPlan:
    """The policy to own (None: own none) and what could not be allowed, for the condition."""

    policy: Obj | None
    resource: Resource
    unresolved: tuple[str, ...] = field(default=())
    dropped: tuple[Dropped, ...] = field(default=())
    """Resolved addresses left out: in a range the operator did not allow."""
    refused_ports: tuple[str, ...] = field(default=())
    """Declared ``domain:port/protocol`` entries outside ``--workspace-egress-ports``."""


def policy_name(ws_name: str) -> str:
    """The owned policy's name; Workspace names are DNS labels, so this always fits 253."""
    return f"{ws_name}-egress"


def declared_domains(spec: Obj) -> list[tuple[str, tuple[tuple[int, str], ...]]]:
    """(domain, ports) for each declared egress entry, in order, bounded by ``MAX_DOMAINS``.

    Entries the validator would refuse are skipped: this reads only admitted Workspaces."""
    egress = WorkspaceSpec.of(spec).egress
    out: list[tuple[str, tuple[tuple[int, str], ...]]] = []
    for entry in egress[:MAX_DOMAINS]:
        if not isinstance(entry, dict) or not isinstance(entry.get("domain"), str):
            continue
        out.append((entry["domain"].lower().rstrip("."), _ports(entry.get("ports"))))
    return out


def _ports(value: object) -> tuple[tuple[int, str], ...]:
    if not isinstance(value, list) or not value:
        return DEFAULT_PORTS
    ports: list[tuple[int, str]] = []
    for item in value:
        if not isinstance(item, dict):
            continue
        port, protocol = item.get("port"), item.get("protocol", "TCP")
        if isinstance(port, int) and 0 < port < 65536 and protocol in ("TCP", "UDP"):
            ports.append((port, str(protocol)))
    return tuple(ports) or DEFAULT_PORTS


def _selector(ws_name: str) -> dict[str, str]:
    return {
        LABEL_APP: LABEL_APP_VALUE,
        LABEL_COMPONENT: LABEL_COMPONENT_VALUE,
        LABEL_WORKSPACE: ws_name,
    }


def _metadata(ws: Obj) -> Obj:
    meta = ws["metadata"]
    return {
        "name": policy_name(meta["name"]),
        "namespace": meta["namespace"],
        "labels": {
            LABEL_APP: LABEL_APP_VALUE,
            LABEL_WORKSPACE: meta["name"],
            LABEL_WORKSPACE_UID: meta["uid"],
        },
        "ownerReferences": [
            {
                "apiVersion": ws.get("apiVersion", "llmsafespaces.dev/v1"),
                "kind": "Workspace",
                "name": meta["name"],
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }


def desired_egress_policy(
    ws: Obj,
    resolved: Mapping[str, Resolution],
    settings: EgressSettings,
    *,
    cilium: bool,
) -> EgressPlan:
    """The egress policy the Workspace should have; see the module docstring."""
    domains, refused = _allowed_ports(declared_domains(ws.get("spec") or {}), settings)
    resource = CILIUM_NETWORK_POLICIES if cilium else NETWORK_POLICIES
    if not domains and not refused and settings.default == "allow":
        return EgressPlan(None, resource)
    if cilium:
        policy = _cilium_policy(ws, domains, settings)
        return EgressPlan(policy, resource, refused_ports=refused)
    return _network_policy(ws, domains, resolved, settings, refused)


def _allowed_ports(
    domains: list[tuple[str, tuple[tuple[int, str], ...]]], settings: EgressSettings
) -> tuple[list[tuple[str, tuple[tuple[int, str], ...]]], tuple[str, ...]]:
    """The domains with only the ports the operator allows, and the refused entries; a domain
    left with no port is left out."""
    kept: list[tuple[str, tuple[tuple[int, str], ...]]] = []
    refused: list[str] = []
    for domain, ports in domains:
        allowed = tuple(p for p in ports if p[0] in settings.allowed_ports)
        refused += [
            f"{domain}:{port}/{proto}" for port, proto in ports if (port, proto) not in allowed
        ]
        if allowed:
            kept.append((domain, allowed))
    return kept, tuple(refused)


def _network_policy(
    ws: Obj,
    domains: list[tuple[str, tuple[tuple[int, str], ...]]],
    resolved: Mapping[str, Resolution],
    settings: EgressSettings,
    refused: tuple[str, ...],
) -> EgressPlan:
    rules: list[Obj] = [_dns_rule(settings)]
    if settings.platform_namespaces:
        rules.append({"to": [_namespaces_peer(settings.platform_namespaces)]})
    unresolved: list[str] = []
    dropped: list[Dropped] = []
    for domain, ports in domains:
        answer = resolved.get(domain)
        if domain.startswith("*.") or answer is None or not answer.addresses:
            unresolved.append(domain)
            continue
        kept, left_out = filter_addresses(domain, sorted(set(answer.addresses)), settings)
        dropped += left_out
        if not kept:
            continue
        rules.append(
            {
                "to": [
                    {"ipBlock": {"cidr": _host_cidr(a)}} for a in kept[:MAX_ADDRESSES_PER_DOMAIN]
                ],
                "ports": [{"port": p, "protocol": proto} for p, proto in ports],
            }
        )
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(ws),
        "spec": {
            "podSelector": {"matchLabels": _selector(ws["metadata"]["name"])},
            "policyTypes": ["Egress"],
            "egress": rules,
        },
    }
    return EgressPlan(policy, NETWORK_POLICIES, tuple(unresolved), tuple(dropped), refused)


def _dns_rule(settings: EgressSettings) -> Obj:
    """Port 53 to the cluster's DNS pods (and a node-local cache's addresses) only: a rule
    without ``to`` would open port 53 on every address, a way out of a default-deny workspace
    (a resolver of the tenant's, or a tunnel over DNS)."""
    peers: list[Obj] = [
        {
            "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: settings.dns_namespace}},
            "podSelector": {"matchLabels": dict(settings.dns_pod_labels)},
        }
    ]
    peers += [{"ipBlock": {"cidr": str(network)}} for network in settings.dns_addresses]
    return {
        "to": peers,
        "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
    }


def _namespaces_peer(namespaces: tuple[str, ...]) -> Obj:
    return {
        "namespaceSelector": {
            "matchExpressions": [
                {"key": NAMESPACE_LABEL, "operator": "In", "values": sorted(namespaces)}
            ]
        }
    }


def _host_cidr(address: str) -> str:
    return f"{address}/128" if ":" in address else f"{address}/32"


def _cilium_policy(
    ws: Obj, domains: list[tuple[str, tuple[tuple[int, str], ...]]], settings: EgressSettings
) -> Obj:
    # DNS goes through Cilium's proxy (the "dns" rule), which is how toFQDNs learns addresses.
    dns_ports = [
        {"ports": [{"port": "53", "protocol": "ANY"}], "rules": {"dns": [{"matchPattern": "*"}]}}
    ]
    dns_pods = {
        "k8s:io.kubernetes.pod.namespace": settings.dns_namespace,
        **{f"k8s:{key}": value for key, value in settings.dns_pod_labels},
    }
    rules: list[Obj] = [{"toEndpoints": [{"matchLabels": dns_pods}], "toPorts": dns_ports}]
    if settings.dns_addresses:
        rules.append(
            {"toCIDR": [str(network) for network in settings.dns_addresses], "toPorts": dns_ports}
        )
    if settings.platform_namespaces:
        rules.append(
            {
                "toEndpoints": [
                    {
                        "matchExpressions": [
                            {
                                "key": "k8s:io.kubernetes.pod.namespace",
                                "operator": "In",
                                "values": sorted(settings.platform_namespaces),
                            }
                        ]
                    }
                ]
            }
        )
    by_ports: dict[tuple[tuple[int, str], ...], list[Obj]] = {}
    for domain, ports in domains:
        match = {"matchPattern": domain} if domain.startswith("*.") else {"matchName": domain}
        by_ports.setdefault(ports, []).append(match)
    for ports, fqdns in by_ports.items():
        rules.append(
            {
                "toFQDNs": fqdns,
                "toPorts": [{"ports": [{"port": str(p), "protocol": proto} for p, proto in ports]}],
            }
        )
    spec: Obj = {
        "endpointSelector": {"matchLabels": _selector(ws["metadata"]["name"])},
        "egress": rules,
    }
    if by_ports:
        spec["egressDeny"] = [_cilium_deny(settings)]
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": _metadata(ws),
        "spec": spec,
    }


def _cilium_deny(settings: EgressSettings) -> Obj:
    """Cilium resolves the names itself, so a name that resolves into the cluster or to the
    metadata endpoint would be allowed: the dropped ranges are denied (deny wins over allow)
    on the ports the FQDN rules open. CIDR rules never select the cluster's own endpoints,
    so DNS and the platform namespaces stay reachable."""
    cidrs: list[Obj] = []
    for network, allowed in denied_networks(settings):
        entry: Obj = {"cidr": str(network)}
        if allowed:
            entry["except"] = [str(a) for a in allowed]
        cidrs.append(entry)
    ports = [{"port": str(p), "protocol": "ANY"} for p in settings.allowed_ports]
    return {"toCIDRSet": cidrs, "toPorts": [{"ports": ports}]}


def next_resolution(
    domains: list[tuple[str, tuple[tuple[int, str], ...]]],
    resolved: Mapping[str, Resolution],
    *,
    min_ttl: float = 5.0,
    max_ttl: float = 300.0,
) -> float | None:
    """Seconds until the earliest answer expires (clamped), or None with nothing to re-resolve."""
    ttls = [
        min(max(resolved[d].ttl, min_ttl), max_ttl)
        for d, _ in domains
        if d in resolved and not d.startswith("*.")
    ]
    return min(ttls) if ttls else None
