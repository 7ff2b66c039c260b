"""What a Kubernetes NetworkPolicy's egress rules let a selected pod reach, as the API's
NetworkPolicy documentation defines it: a rule allows a destination when one of its peers
matches it (no ``to``: every destination) and one of its ports does (no ``ports``: every
port). Enough to judge the policies the controller renders; named ports are not resolved.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from wspin.core.objects import Obj


@dataclass(frozen=True)
class Destination:
    """Where a packet goes: an address, and the pod and namespace behind it (None for an
    address outside the cluster)."""

    ip: str
    namespace: str | None = None
    namespace_labels: dict[str, str] = field(default_factory=dict)
    pod_labels: dict[str, str] = field(default_factory=dict)


def _selects(selector: Obj, labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _peer_matches(peer: Obj, to: Destination, policy_namespace: str) -> bool:
    block = peer.get("ipBlock")
    if block is not None:
        address = ipaddress.ip_address(to.ip)
        if address not in ipaddress.ip_network(block["cidr"]):
            return False
        return not any(address in ipaddress.ip_network(e) for e in block.get("except") or [])
    if to.namespace is None:
        return False  # pod and namespace selectors select pods, never outside addresses
    namespaces = peer.get("namespaceSelector")
    if namespaces is None:
        in_namespace = to.namespace == policy_namespace
    else:
        in_namespace = _selects(namespaces, to.namespace_labels)
    pods = peer.get("podSelector")
    return in_namespace and (pods is None or _selects(pods, to.pod_labels))


def _port_matches(entry: Obj, port: int, protocol: str) -> bool:
    if entry.get("protocol", "TCP") != protocol:
        return False
    if "port" not in entry:
        return True
    first = entry["port"]
    return isinstance(first, int) and first <= port <= int(entry.get("endPort", first))


def egress_allowed(policy: Obj, to: Destination, port: int, protocol: str = "TCP") -> bool:
    """Whether ``policy`` (a NetworkPolicy with policyTypes Egress) lets its pods reach ``to``
    on ``port``/``protocol``."""
    namespace = str(policy["metadata"].get("namespace") or "")
    for rule in policy["spec"].get("egress") or []:
        peers = rule.get("to")
        if peers and not any(_peer_matches(p, to, namespace) for p in peers):
            continue
        ports = rule.get("ports")
        if ports and not any(_port_matches(p, port, protocol) for p in ports):
            continue
        return True
    return False
