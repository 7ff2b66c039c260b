"""A fleet of Active Workspaces and their pods as plain dicts, each pod on its own loopback
address (``127.0.x.y``), for the agent scheduler's fleet test and benchmark: the caches it
reads, without an API server."""

from __future__ import annotations

from controller.types import ObjectKey
from tests.controller.workspace.factories import injected
from wspin.core.objects import Obj


class Cache:
    """A cache's read side over plain dicts."""

    def __init__(self) -> None:
        self.objects: dict[ObjectKey, Obj] = {}

    def get(self, key: ObjectKey) -> Obj | None:
        return self.objects.get(key)

    def list(self, namespace: str | None = None, labels: dict[str, str] | None = None) -> list[Obj]:
        return list(self.objects.values())

    def put(self, obj: Obj) -> None:
        meta = obj["metadata"]
        self.objects[ObjectKey(meta["namespace"], meta["name"])] = obj

    def write_status(self, key: ObjectKey, status: Obj) -> None:
        """A status write as the API server makes it: a new object, a new version (nothing
        when unchanged)."""
        old = self.objects[key]
        if old.get("status") == status:
            return
        meta = {
            **old["metadata"],
            "resourceVersion": str(int(old["metadata"]["resourceVersion"]) + 1),
        }
        self.objects[key] = {**old, "metadata": meta, "status": status}


def address(index: int) -> str:
    """The loopback address of the ``index``-th pod (up to 64,000)."""
    return f"127.0.{index // 250}.{index % 250 + 1}"


def token(index: int) -> str:
    return f"token-{index}"


def fleet_member(index: int, started: str) -> tuple[Obj, Obj]:
    """The ``index``-th Workspace, Active since ``started``, and its Running, injected pod."""
    name, uid = f"ws-{index:05d}", f"00000000-0000-4000-8000-{index:012d}"
    ws = {
        "metadata": {
            "name": name,
            "namespace": "fleet",
            "uid": uid,
            "generation": 1,
            "resourceVersion": "1",
        },
        "spec": {"runtime": "python", "owner": {"userID": f"user-{index % 7}"}},
        "status": {"phase": "Active", "startTime": started, "conditions": []},
    }
    pod = injected(
        {
            "metadata": {
                "name": f"{name}-pod",
                "namespace": "fleet",
                "uid": f"pod-{uid}",
                "annotations": {},
            },
            "spec": {"containers": [{"name": "workspace", "image": "i", "env": []}], "volumes": []},
        }
    )
    pod["status"] = {"phase": "Running", "podIP": address(index)}
    return ws, pod
