"""The relay-router-peers ConfigMap and the relay-vm-tokens Secret, against the API."""

from __future__ import annotations

import json

from controller.relay.peers import PEERS_CONFIGMAP, peer_entries, render_peers, sync_peers
from controller.relay.spec import new_instance
from controller.relay.tokens import TOKENS_SECRET, generate_token, read_tokens, write_tokens
from wspin.core.kinds import CONFIGMAPS, SECRETS
from wspin.kube.client import Kube

PEER = {
    "id": "i-1",
    "endpoint": "1.2.3.4:8080",
    "provider": "aws",
    "state": "healthy",
    "token": "t",
}


def test_an_empty_fleet_renders_exactly_an_empty_array() -> None:
    assert render_peers([]) == '{"relays":[]}'


def test_peers_carry_endpoint_and_token_and_nothing_of_wireguard() -> None:
    instances = [
        new_instance(instance_id="i-1", provider="aws", region="r", public_ip="1.2.3.4"),
        new_instance(instance_id="o-1", provider="oci", region="r", state=""),
    ]
    peers = peer_entries(instances, {"aws": "tok-a"})
    assert peers[0]["endpoint"] == "1.2.3.4:8080" and peers[0]["token"] == "tok-a"
    assert peers[1]["endpoint"] == "" and peers[1]["token"] == "" and peers[1]["state"] == "healthy"
    text = render_peers(peers)
    assert list(json.loads(text)["relays"][0]) == ["id", "endpoint", "provider", "state", "token"]
    assert "wgIP" not in text and "publicKey" not in text


async def test_the_configmap_is_created_without_owner_and_not_rewritten_when_unchanged(
    kube: Kube, namespace: str
) -> None:
    assert await sync_peers(kube, namespace, [PEER])  # type: ignore[list-item]
    created = await kube.get(CONFIGMAPS, PEERS_CONFIGMAP, namespace)
    assert json.loads(created["data"]["peers.json"])["relays"] == [PEER]
    assert not created["metadata"].get("ownerReferences")
    assert not await sync_peers(kube, namespace, [PEER])  # type: ignore[list-item]
    again = await kube.get(CONFIGMAPS, PEERS_CONFIGMAP, namespace)
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert await sync_peers(kube, namespace, [])
    updated = await kube.get(CONFIGMAPS, PEERS_CONFIGMAP, namespace)
    assert updated["data"]["peers.json"] == '{"relays":[]}'


async def test_an_update_fills_a_null_data_map_and_strips_owner_references(
    kube: Kube, namespace: str
) -> None:
    owner = await kube.create(CONFIGMAPS, {"metadata": {"name": "owner"}}, namespace)
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
           "uid": owner["metadata"]["uid"]}  # fmt: skip
    await kube.create(
        CONFIGMAPS, {"metadata": {"name": PEERS_CONFIGMAP, "ownerReferences": [ref]}}, namespace
    )
    assert await sync_peers(kube, namespace, [])
    updated = await kube.get(CONFIGMAPS, PEERS_CONFIGMAP, namespace)
    assert updated["data"] == {"peers.json": '{"relays":[]}'}
    assert not updated["metadata"].get("ownerReferences")


async def test_tokens_round_trip_and_an_update_replaces_the_whole_map(
    kube: Kube, namespace: str
) -> None:
    assert await read_tokens(kube, namespace) == {}
    await write_tokens(kube, namespace, {"aws": "t-aws", "oci": "t-oci"})
    assert await read_tokens(kube, namespace) == {"aws": "t-aws", "oci": "t-oci"}
    await write_tokens(kube, namespace, {"aws": "t-new"})
    assert await read_tokens(kube, namespace) == {"aws": "t-new"}
    secret = await kube.get(SECRETS, TOKENS_SECRET, namespace)
    assert not secret["metadata"].get("ownerReferences")


def test_generated_tokens_are_64_hex_and_differ() -> None:
    first, second = generate_token(), generate_token()
    assert len(first) == 64 and int(first, 16) >= 0 and first != second
