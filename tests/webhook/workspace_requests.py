"""Workspace admission requests as the API server sends them to the validator: a Workspace
object, and the CREATE or UPDATE request carrying it."""

from __future__ import annotations

from typing import Any


def workspace(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"runtime": "python", "storage": {"size": "10Gi"}}
    base.update(spec)
    return {
        "apiVersion": "llmsafespaces.dev/v1",
        "kind": "Workspace",
        "metadata": {"name": "ws1", "namespace": "ws-demo"},
        "spec": base,
    }


def create(obj: dict[str, Any]) -> dict[str, Any]:
    return {"operation": "CREATE", "object": obj, "oldObject": None}


def update(obj: dict[str, Any], old: dict[str, Any] | None, sub: str = "") -> dict[str, Any]:
    request: dict[str, Any] = {"operation": "UPDATE", "object": obj, "oldObject": old}
    if sub:
        request["subResource"] = sub
    return request
