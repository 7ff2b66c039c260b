"""The names, labels and owner of everything a Workspace owns, and its service account. Pure.

A Workspace ``ws`` owns the pod ``<ws>-<first 8 chars of its uid>``, the PVC
``workspace-<ws>`` (``storage``), the service account ``workspace-<ws>`` and the Secret
``workspace-pw-<ws>`` (``credentials``), each with a controller ownerReference to it (garbage
collection removes them with it) and the workspace labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from controller.types import Obj
from controller.workspace.pod.volumes import password_secret_name
from wspin.core.contract import API_GROUP, API_VERSION, LABEL_WORKSPACE
from wspin.core.errors import WspinError
from wspin.core.workspace_pod import SELECTOR_LABELS

PVC_PREFIX: Final = "workspace-"
LEGACY_PVC_SUFFIX: Final = "-workspace"
"""Earlier releases named the PVC ``<ws>-workspace``; one the Workspace owns keeps being used."""


class PodBuildError(WspinError):
    """The Workspace cannot become a pod; the message names the field (phase Failed)."""


class PodRejected(PodBuildError):
    """The API server refused the pod, or an object it needs, as written: sent again only
    once the retry after the failure is due."""


@dataclass(frozen=True)
class Names:
    """The names of everything one Workspace owns."""

    pod: str
    pvc: str
    legacy_pvc: str
    service_account: str
    secret: str


def names(ws: Obj) -> Names:
    """``<ws>-<first 8 chars of uid>`` for the pod: a recreated Workspace of the same name gets a
    new pod name, so a slow-terminating old pod never blocks the new one."""
    meta = ws.get("metadata") or {}
    name, uid = str(meta.get("name", "")), str(meta.get("uid", ""))
    if not uid:
        raise PodBuildError(f"Workspace {name!r} has no metadata.uid yet")
    return Names(
        pod=f"{name}-{uid[:8]}",
        pvc=f"{PVC_PREFIX}{name}",
        legacy_pvc=f"{name}{LEGACY_PVC_SUFFIX}",
        service_account=f"workspace-{name}",
        secret=password_secret_name(name),
    )


def selector_labels(ws_name: str) -> dict[str, str]:
    """The labels that make a pod a workspace pod (the webhook's objectSelector keys on them)."""
    return {**SELECTOR_LABELS, LABEL_WORKSPACE: ws_name}


def owner_reference(ws: Obj) -> Obj:
    meta = ws["metadata"]
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "Workspace",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def owned_metadata(ws: Obj, name: str, labels: dict[str, str] | None = None) -> Obj:
    """Metadata of an object ``ws`` owns: its name, the Workspace's namespace, labels, owner."""
    return {
        "name": name,
        "namespace": ws["metadata"].get("namespace", ""),
        "labels": labels if labels is not None else selector_labels(ws["metadata"]["name"]),
        "ownerReferences": [owner_reference(ws)],
    }


def desired_service_account(ws: Obj) -> Obj:
    """``workspace-<ws>``: the pod's identity, with no API token mounted."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": owned_metadata(ws, names(ws).service_account),
        "automountServiceAccountToken": False,
    }
