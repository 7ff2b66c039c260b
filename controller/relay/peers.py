"""The ``relay-router-peers`` ConfigMap: where the router learns each relay's endpoint and token.

It has no ownerReference on purpose: garbage-collected with the CR, the router's mounted
file would never see the cleared list. An unchanged body is not written, so the ConfigMap's
resourceVersion (and the kubelet's volume refresh) stays quiet between changes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Final, TypedDict

from controller.relay.cloudinit import RELAY_PORT
from controller.relay.entries import token_key
from controller.relay.spec import Instance
from controller.toolkit.upserts import upsert_configmap
from wspin.kube.client import Kube

PEERS_CONFIGMAP: Final = "relay-router-peers"
PEERS_KEY: Final = "peers.json"


class Peer(TypedDict):
    id: str
    endpoint: str
    provider: str
    state: str
    token: str


def peer_entries(instances: Sequence[Instance], tokens: Mapping[str, str]) -> list[Peer]:
    """One peer per instance, in status order; endpoint ``<ip>:8080`` or empty without an IP;
    ``tokens`` by token key (the provider's name unless the entry records another)."""
    peers: list[Peer] = []
    for instance in instances:
        ip = str(instance.get("publicIP") or "")
        provider = str(instance.get("provider") or "")
        peers.append(
            {
                "id": str(instance.get("id") or ""),
                "endpoint": f"{ip}:{RELAY_PORT}" if ip else "",
                "provider": provider,
                "state": str(instance.get("state") or "healthy"),
                "token": tokens.get(token_key(instance), ""),
            }
        )
    return peers


def render_peers(peers: Sequence[Peer]) -> str:
    """Compact JSON, keys in contract order; an empty fleet is exactly ``{"relays":[]}``."""
    return json.dumps({"relays": list(peers)}, separators=(",", ":"), ensure_ascii=False)


async def sync_peers(kube: Kube, namespace: str, peers: Sequence[Peer]) -> bool:
    """Create or update the ConfigMap; returns False when it already held this content."""
    return await upsert_configmap(
        kube, namespace, PEERS_CONFIGMAP, {PEERS_KEY: render_peers(peers)}
    )
