"""Workspace pods in the states the kubelet and the scheduler report, for the recovery tests:
the pod's spec as the controller builds it (platform inits, the workspace container), and
container statuses in core/v1's field shapes."""

from __future__ import annotations

import copy
from typing import Any

from wspin.core.objects import Obj

CREATED = "2026-11-29T12:00:00Z"
RUNTIME_IMAGE = "ghcr.io/acme/python:3.12"
AGENTD_IMAGE = "ghcr.io/lenaxia/llmsafespaces/agentd@sha256:" + "0123456789abcdef" * 4
INITS = ("platform-init", "platform-bootstrap", "platform-materialize")


def running(ready: bool = True, started: str = "2026-11-29T12:00:30Z") -> Obj:
    return {"ready": ready, "state": {"running": {"startedAt": started}}}


def completed(finished: str = "2026-11-29T12:00:20Z") -> Obj:
    return {
        "ready": True,
        "state": {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": finished}},
    }


def waiting(reason: str, message: str = "", restarts: int = 0, last: Obj | None = None) -> Obj:
    status: Obj = {
        "ready": False,
        "restartCount": restarts,
        "state": {"waiting": {"reason": reason}},
    }
    if message:
        status["state"]["waiting"]["message"] = message
    if last is not None:
        status["lastState"] = {"terminated": last}
    return status


def exited(
    code: int, reason: str = "Error", message: str = "", at: str = "2026-11-29T12:01:00Z"
) -> Obj:
    return {"exitCode": code, "reason": reason, "message": message, "finishedAt": at}


def pod(
    *,
    inits: dict[str, Obj] | None = None,
    main: Obj | None = None,
    phase: str = "Pending",
    node: str = "node-a",
    sidecar: bool = False,
    setup: bool = False,
    uid: str = "pod-uid-1",
    conditions: list[Obj] | None = None,
    **status: Any,
) -> Obj:
    """A workspace pod with the controller's init containers (``setup``: with
    ``workspace-setup``; ``sidecar``: the agentd sidecar last) and the given statuses."""
    names = [*INITS, *(["workspace-setup"] if setup else []), *(["agentd"] if sidecar else [])]
    init_containers = []
    for name in names:
        container: Obj = {"name": name, "image": AGENTD_IMAGE}
        if name == "workspace-setup":
            container["image"] = RUNTIME_IMAGE
        if name == "agentd":
            container["restartPolicy"] = "Always"
        init_containers.append(container)
    spec: Obj = {
        "initContainers": init_containers,
        "containers": [
            {
                "name": "workspace",
                "image": RUNTIME_IMAGE,
                "resources": {
                    "requests": {"cpu": "500m", "memory": "512Mi"},
                    "limits": {"cpu": "2", "memory": "2Gi"},
                },
            }
        ],
        "nodeSelector": {"kubernetes.io/arch": "amd64"},
        "volumes": [
            {"name": "workspace", "persistentVolumeClaim": {"claimName": "workspace-ws1"}},
            {"name": "pw-secret", "secret": {"secretName": "workspace-pw-ws1"}},
        ],
    }
    if node:
        spec["nodeName"] = node
    body: Obj = {"phase": phase, "conditions": copy.deepcopy(conditions or [])}
    if inits:
        body["initContainerStatuses"] = [
            {"name": name, "restartCount": 0, **state} for name, state in inits.items()
        ]
    if main is not None:
        body["containerStatuses"] = [{"name": "workspace", "restartCount": 0, **main}]
    body.update(status)
    return {
        "metadata": {
            "name": "ws1-b8985526",
            "namespace": "team-a",
            "uid": uid,
            "creationTimestamp": CREATED,
        },
        "spec": spec,
        "status": body,
    }


def booted(**more: Obj) -> dict[str, Obj]:
    """The platform inits all completed (and whatever else is given)."""
    return {**{name: completed() for name in INITS}, **more}


def unschedulable(message: str) -> list[Obj]:
    return [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    ]
