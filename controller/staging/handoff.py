"""The handoff Secret ``workspace-relay-<ws>`` in the workspace's namespace: the only token
store. The API's batch builder reads it and gives the pod each provider's token and router
path instead of its key.

Owned by the Workspace (garbage-collected with it). Written only when its bytes change: an
identical handoff is no write, so a steady-state pass costs one GET here.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Final

from controller.staging.secrets import secret_value
from controller.staging.tokens import (
    HANDOFF_KEY,
    Handoff,
    HandoffEntry,
    handoff_name,
    parse_entries,
    render,
)
from wspin.resources import SECRETS, WORKSPACES, Kube

Obj = dict[str, Any]
LABEL_WORKSPACE: Final = "llmsafespaces.dev/workspace"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"


@dataclass(frozen=True)
class Existing:
    """The handoff as read at the start of token renewal."""

    secret: Obj | None = None
    raw: bytes | None = None
    entries: dict[str, HandoffEntry] = field(default_factory=dict)


class HandoffWriter:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def read(self, ws: Obj) -> Existing:
        meta = ws["metadata"]
        secret = await self.kube.get_or_none(
            SECRETS, handoff_name(meta["name"]), meta.get("namespace")
        )
        if secret is None:
            return Existing()
        raw = secret_value(secret, HANDOFF_KEY)
        return Existing(secret, raw, parse_entries(raw))

    async def write(
        self,
        ws: Obj,
        existing: Existing,
        revision: str,
        router_url: str,
        entries: list[HandoffEntry],
    ) -> None:
        """Create, update (with the read resourceVersion) or leave alone."""
        body = render(Handoff(revision=revision, routerURL=router_url, providers=entries))
        if existing.raw == body:
            return
        data = {HANDOFF_KEY: base64.b64encode(body).decode()}
        meta = ws["metadata"]
        if existing.secret is not None:
            updated = dict(existing.secret)
            updated["data"] = data
            updated.pop("stringData", None)
            await self.kube.replace(SECRETS, updated)
            return
        secret = {
            "metadata": {
                "name": handoff_name(meta["name"]),
                "namespace": meta.get("namespace"),
                "labels": {LABEL_WORKSPACE: meta["name"], LABEL_MANAGED_BY: "wspin-controller"},
                "ownerReferences": [
                    {
                        "apiVersion": WORKSPACES.api_version,
                        "kind": WORKSPACES.kind,
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "type": "Opaque",
            "data": data,
        }
        await self.kube.create(SECRETS, secret, meta.get("namespace"))
