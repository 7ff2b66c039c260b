"""Whether the Workspace CRD keeps what the controller writes to a Workspace's status: a client
that records every status body it sends (captured there, so the API server's pruning cannot
hide a gap), the CRD's status schema, and the walk that finds what the schema does not
declare."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from wspin.core.kinds import WORKSPACES, Resource
from wspin.core.objects import Obj
from wspin.kube.client import Kube

CRD = Path(__file__).resolve().parents[2] / "charts/wspin/crds/workspaces.llmsafespaces.dev.yaml"


class RecordingKube(Kube):
    """A Kube that keeps every Workspace status body it sends."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(kube.api)
        self.statuses: list[Obj] = []

    async def patch(
        self, res: Resource, name: str, patch: Any, namespace: str | None = None, **kw: Any
    ) -> Obj:
        if res is WORKSPACES and kw.get("sub") == "status":
            self.statuses.append(patch.get("status") or {})
        return await super().patch(res, name, patch, namespace, **kw)

    async def replace(self, res: Resource, obj: Obj, *, sub: str = "") -> Obj:
        if res is WORKSPACES:
            self.statuses.append(obj.get("status") or {})
        return await super().replace(res, obj, sub=sub)


def status_schema() -> Obj:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = crd["spec"]["versions"]
    schema: Obj = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    return schema


def undeclared(value: Any, schema: Obj, path: str) -> list[str]:
    """Paths in ``value`` the schema does not declare (merge-patch nulls are deletions)."""
    if value is None:
        return []
    if isinstance(value, dict):
        declared = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        found: list[str] = []
        for key, child in value.items():
            if key in declared:
                found += undeclared(child, declared[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                found += undeclared(child, extra, f"{path}.{key}")
            else:
                found.append(f"{path}.{key}")
        return found
    if isinstance(value, list):
        items = schema.get("items") or {}
        return [p for i, item in enumerate(value) for p in undeclared(item, items, f"{path}[{i}]")]
    return []
