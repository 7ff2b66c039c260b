"""Event-to-key mapping: which ownerReferences point at a controller's objects."""

from __future__ import annotations

from controller.runtime.controller import owner_keys, owner_mapper
from controller.types import ObjectKey
from wspin.resources import INFERENCE_RELAYS, WORKSPACES


def test_only_a_controller_reference_of_the_right_kind_and_group_maps_to_an_owner() -> None:
    obj = {
        "metadata": {
            "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "llmsafespaces.dev/v1", "kind": "Workspace", "name": "w1"},
                {
                    "apiVersion": "other.dev/v1",
                    "kind": "Workspace",
                    "name": "w2",
                    "controller": True,
                },
                {
                    "apiVersion": "llmsafespaces.dev/v1",
                    "kind": "Workspace",
                    "name": "w3",
                    "controller": True,
                },
            ],
        }
    }
    assert owner_keys(obj, WORKSPACES) == [ObjectKey("ns", "w3")]


def test_a_cluster_scoped_owner_maps_to_a_key_without_namespace() -> None:
    obj = {
        "metadata": {
            "namespace": "relay-ns",
            "ownerReferences": [
                {
                    "apiVersion": "llmsafespaces.dev/v1",
                    "kind": "InferenceRelay",
                    "name": "r1",
                    "controller": True,
                }
            ],
        }
    }
    assert list(owner_mapper(INFERENCE_RELAYS)(obj)) == [ObjectKey("", "r1")]


def test_an_object_without_owners_maps_to_nothing() -> None:
    assert owner_keys({"metadata": {"name": "x"}}, WORKSPACES) == []
