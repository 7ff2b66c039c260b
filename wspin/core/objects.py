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


def nesting_depth(value: object, limit: int) -> int:
    """How many dicts and lists deep ``value`` goes, counted up to ``limit + 1`` at most.

    A loop, not recursion: a custom resource that keeps undeclared fields takes whatever depth
    its author writes (about 1,024 levels get past the JSON decoders), past what a recursive
    walk, ``==`` or ``copy.deepcopy`` survive."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth) for child in children)
    return deepest


def same_json(first: object, second: object) -> bool:
    """Whether two decoded JSON values are equal, at any depth (a loop, not ``==``'s
    recursion); ``1`` and ``1.0`` or ``true`` differ, as their JSON does."""
    stack: list[tuple[object, object]] = [(first, second)]
    while stack:
        a, b = stack.pop()
        if type(a) is not type(b):
            return False
        if isinstance(a, dict):
            assert isinstance(b, dict)
            if a.keys() != b.keys():
                return False
            stack.extend((a[key], b[key]) for key in a)
        elif isinstance(a, list):
            assert isinstance(b, list)
            if len(a) != len(b):
                return False
            stack.extend(zip(a, b, strict=True))
        elif a != b:
            return False
    return True
