"""Kubernetes objects as both processes hold them: plain dicts, keyed by namespace and name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
"""An object exactly as the API server sent it (JSON decoded), never a client model."""


@dataclass(frozen=True, order=True)
class ObjectKey:
    """namespace/name of an object; namespace is "" for cluster-scoped kinds."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def of(cls, obj: Obj) -> ObjectKey:
        meta = obj.get("metadata", {})
        return cls(meta.get("namespace", "") or "", meta["name"])
