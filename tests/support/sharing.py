"""Reading how cached objects share memory: what two of them hold in common but apart."""

from __future__ import annotations

from typing import Any


def unshared_equal_subtrees(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths where ``a`` and ``b`` hold equal dicts or lists that are not one object (the
    compaction of an informer's cache leaves none)."""
    if not isinstance(a, dict | list) or type(a) is not type(b):
        return []
    if a == b:
        return [] if a is b else [path or "/"]
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            found
            for key in a.keys() & b.keys()
            for found in unshared_equal_subtrees(a[key], b[key], f"{path}/{key}")
        ]
    assert isinstance(a, list) and isinstance(b, list)
    return [
        found
        for i, (x, y) in enumerate(zip(a, b, strict=False))
        for found in unshared_equal_subtrees(x, y, f"{path}/{i}")
    ]


def containers(value: Any) -> list[Any]:
    """Every dict and list reachable from ``value``, ``value`` included."""
    found: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            found.append(item)
            stack.extend(item)
    return found
