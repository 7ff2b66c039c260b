"""This cluster's identity, the value of every relay VM's ``llmsafespaces-cluster`` tag.

Two clusters sharing one cloud account must never sweep each other's relays: the orphan
detector destroys only VMs carrying this value. By default it is the UID of the
``kube-system`` namespace, which exists in every cluster, never changes while the cluster
lives, and differs between clusters; ``--relay-cluster-id`` sets it instead (a cluster
rebuilt from a backup keeps its VMs by setting the old value).
"""

from __future__ import annotations

import re
from typing import Final

from wspin.core.errors import ConfigError, KubeAPIError, TransientError
from wspin.core.kinds import NAMESPACES
from wspin.kube.client import Kube

IDENTITY_NAMESPACE: Final = "kube-system"
FLAG: Final = "--relay-cluster-id"
HELM: Final = "controller.inferenceRelay.clusterID"
_VALID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,62}$")
"""What both clouds accept as a tag value and what a log line can show unquoted."""


def check_cluster_id(value: str) -> str:
    """``value`` when it can be a tag value; raises ``ConfigError`` naming the flag."""
    if value and not _VALID.match(value):
        raise ConfigError(
            f"{FLAG} {value!r} is not a valid cluster id",
            f"set {FLAG} / {HELM} to 1-63 letters, digits, '.', '_', ':' or '-' "
            "(starting with a letter or digit), or leave it empty for the kube-system UID",
        )
    return value


class ClusterIdentity:
    """The cluster id: the configured one, else read once from the API and kept."""

    def __init__(self, kube: Kube | None, configured: str = "") -> None:
        self.kube = kube
        self._value = check_cluster_id(configured)

    async def resolve(self) -> str:
        if self._value:
            return self._value
        if self.kube is None:
            raise TransientError("no Kubernetes client to read the cluster id")
        try:
            namespace = await self.kube.get(NAMESPACES, IDENTITY_NAMESPACE)
        except KubeAPIError as err:
            raise TransientError(
                f"cannot read namespace {IDENTITY_NAMESPACE} for the cluster id: {err.message}",
                f"grant get on namespaces/{IDENTITY_NAMESPACE}, or set {FLAG} / {HELM}",
            ) from err
        uid = str((namespace.get("metadata") or {}).get("uid") or "")
        if not uid:
            raise TransientError(f"namespace {IDENTITY_NAMESPACE} has no UID")
        self._value = uid
        return uid
