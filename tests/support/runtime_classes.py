"""RuntimeClasses and Nodes for API-level tests: kube-apiserver refuses a pod naming a
RuntimeClass that does not exist, so a test whose pods name one makes sure it is there first,
as the platform's operator does before installing wspin; a pod bound to a Node that does not
exist is removed by the controller manager."""

from __future__ import annotations

import contextlib
from typing import Final

from wspin.core.errors import AlreadyExists
from wspin.core.kinds import Resource
from wspin.kube.client import Kube

NODES: Final = Resource("", "v1", "nodes", namespaced=False, kind="Node")
RUNTIME_CLASSES: Final = Resource(
    "node.k8s.io", "v1", "runtimeclasses", namespaced=False, kind="RuntimeClass"
)
HANDLERS: Final = {"gvisor": "runsc", "kata": "kata-qemu"}
"""The node's runtime handler for a class name (default: the name itself)."""


async def ensure_runtime_class(kube: Kube, name: str) -> None:
    """Create RuntimeClass ``name`` unless it exists. Cluster-scoped and shared by every test
    on a cluster, so it is never deleted: another test may have a pod naming it."""
    body = {
        "apiVersion": RUNTIME_CLASSES.api_version,
        "kind": RUNTIME_CLASSES.kind,
        "metadata": {"name": name},
        "handler": HANDLERS.get(name, name),
    }
    with contextlib.suppress(AlreadyExists):
        await kube.create(RUNTIME_CLASSES, body)


async def ensure_node(kube: Kube, name: str) -> None:
    """Create Node ``name`` unless it exists (never deleted, as above): on a cluster the pod
    garbage collector force-deletes a pod bound to a node that does not exist."""
    body = {"apiVersion": NODES.api_version, "kind": NODES.kind, "metadata": {"name": name}}
    with contextlib.suppress(AlreadyExists):
        await kube.create(NODES, body)
