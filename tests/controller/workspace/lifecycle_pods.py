"""Workspace pods in the states the kubelet and the scheduler drive a Workspace's lifecycle
through: a pod builder and the named states the phase table walks."""

from __future__ import annotations

from wspin.core.objects import Obj


def pod(
    *,
    phase: str = "Pending",
    node: str = "",
    ip: str = "",
    ready: bool = False,
    main: Obj | None = None,
    sidecar: Obj | None = None,
    deleting: bool = False,
    reason: str = "",
    message: str = "",
    unschedulable: str = "",
) -> Obj:
    """A workspace pod in the state the kubelet and scheduler report."""
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if unschedulable:
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": unschedulable,
            }
        )
    status: Obj = {"phase": phase, "conditions": conditions}
    if ip:
        status["podIP"] = ip
    if main is not None:
        status["containerStatuses"] = [{"name": "workspace", **main}]
    if sidecar is not None:
        status["initContainerStatuses"] = [{"name": "agentd", **sidecar}]
    if reason:
        status["reason"], status["message"] = reason, message
    meta: Obj = {"name": "ws1-b8985526", "creationTimestamp": "2026-11-29T11:00:00Z"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T12:00:00Z"
    spec: Obj = {"containers": [{"name": "workspace", "image": "python"}]}
    if sidecar is not None:
        spec["initContainers"] = [{"name": "agentd", "restartPolicy": "Always"}]
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": status}


RUNNING = {"ready": True, "state": {"running": {}}}
UNREADY = {"ready": False, "state": {"running": {}}}
CRASHING = {"ready": False, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
UNSCHEDULED = pod()
UNSCHEDULABLE = pod(unschedulable="0/3 nodes are available: 3 Insufficient memory.")
SCHEDULED = pod(
    node="n1", main={"ready": False, "state": {"waiting": {"reason": "PodInitializing"}}}
)
STARTED = pod(phase="Running", node="n1", ip="10.0.0.7", main=UNREADY)
READY = pod(phase="Running", node="n1", ip="10.0.0.7", ready=True, main=RUNNING)
UNREADY_POD = pod(phase="Running", node="n1", ip="10.0.0.7", main=CRASHING)
DELETED = pod(phase="Running", node="n1", ip="10.0.0.7", ready=True, main=RUNNING, deleting=True)
EVICTED = pod(
    phase="Failed", node="n1", reason="Evicted", message="The node was low on resource: memory."
)
