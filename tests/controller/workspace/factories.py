"""Workspace and pod dicts shaped like the API server returns them."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import TYPE_CHECKING, Any

from controller.workspace.pod.credential_keys import CredentialKeys
from controller.workspace.pod.credentials import WorkspaceCredentials, derive_credentials
from tests.support.runtime_classes import ensure_runtime_class
from tests.support.waiting import eventually
from wspin.core.contract import AGENTD, DELIVERY_ANNOTATION, OPENCODE
from wspin.core.errors import AlreadyExists
from wspin.core.runtimes import RUNTIME_ENVIRONMENTS
from wspin.kube.client import Kube

if TYPE_CHECKING:
    from tests.controller.workspace.conftest import Harness

UID = "b8985526-5983-4ade-9338-3b5f9fd93057"
AGENTD_IMAGE = "ghcr.io/lenaxia/llmsafespaces/agentd@sha256:" + "0123456789abcdef" * 4
OPENCODE_IMAGE = "ghcr.io/lenaxia/llmsafespaces/opencode@sha256:" + "fedcba9876543210" * 4


TEST_KEYS = CredentialKeys("t1", {"t1": bytes(range(32)), "t0": bytes(range(32, 64))})
"""A fixed credentials key (and a second, older one) so derived values are reproducible."""


def credentials(
    ws: dict[str, Any] | None = None, key_id: str | None = None
) -> WorkspaceCredentials:
    """The values ``ws`` (the factory Workspace by default) derives from ``TEST_KEYS``."""
    return derive_credentials(TEST_KEYS, ws if ws is not None else workspace(), key_id)


NODE = "node-a"
"""The node the tests' pods are bound to (the harness creates it)."""
RUNTIME_CLASS = "gvisor"
"""The platform's default RuntimeClass in the tests' settings; the API server refuses a pod
naming one that does not exist."""

RUNTIME_IMAGE = "ghcr.io/example/runtime-python:3.12@sha256:" + "ab" * 32
"""What the ``python`` RuntimeEnvironment of ``publish_runtime`` runs."""


async def publish_runtime(kube: Kube, name: str = "python") -> None:
    """The RuntimeEnvironment the Workspaces here name and the RuntimeClass their pods run
    with (both cluster scoped: created if absent)."""
    await ensure_runtime_class(kube, RUNTIME_CLASS)
    body = {
        "apiVersion": "llmsafespaces.dev/v1",
        "kind": "RuntimeEnvironment",
        "metadata": {"name": name},
        "spec": {"image": RUNTIME_IMAGE, "language": "python", "version": "3.12"},
    }
    with contextlib.suppress(AlreadyExists):
        await kube.create(RUNTIME_ENVIRONMENTS, body)


async def create_service_account(kube: Kube, ws: dict[str, Any]) -> None:
    """Play the controller's first write for ``ws``'s pod: its service account (a real API
    server refuses a pod whose account is missing)."""
    from controller.workspace.pod import ownership
    from controller.workspace.pod.names import desired_service_account
    from wspin.core.kinds import SERVICE_ACCOUNTS

    account = ownership.stamp(desired_service_account(ws), ws)
    with contextlib.suppress(AlreadyExists):
        await kube.create(SERVICE_ACCOUNTS, account, ws["metadata"]["namespace"])


def workspace(name: str = "ws1", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"runtime": "python", "storage": {"size": "10Gi"}}
    body.update(spec)
    return {
        "apiVersion": "llmsafespaces.dev/v1",
        "kind": "Workspace",
        "metadata": {
            "name": name,
            "namespace": "ws-demo",
            "uid": UID,
            "generation": 1,
            "resourceVersion": "7",
        },
        "spec": body,
    }


def injected(pod: dict[str, Any], *, agentd: bool = True, opencode: bool = True) -> dict[str, Any]:
    """``pod`` as the webhook leaves it: image volumes, markers and the receipt annotation."""
    pod = copy.deepcopy(pod)
    main = pod["spec"]["containers"][0]
    receipt = {}
    for enabled, artifact, image in (
        (agentd, AGENTD, AGENTD_IMAGE),
        (opencode, OPENCODE, OPENCODE_IMAGE),
    ):
        if not enabled:
            continue
        pod["spec"]["volumes"].append(
            {"name": artifact.volume, "image": {"reference": image, "pullPolicy": "IfNotPresent"}}
        )
        main["env"].append({"name": artifact.marker_env, "value": "1"})
        receipt[artifact.name] = "sha256:" + image.rpartition(":")[2]
    pod["metadata"]["annotations"][DELIVERY_ANNOTATION] = json.dumps(
        receipt, sort_keys=True, separators=(",", ":")
    )
    pod["spec"]["nodeName"] = NODE
    return pod


def with_status(
    pod: dict[str, Any],
    *,
    ready: bool = False,
    exit_code: int | None = None,
    message: str = "",
    current: bool = False,
    restarts: int = 0,
    phase: str = "Running",
) -> dict[str, Any]:
    """Pod status as the kubelet reports it: optionally a terminated or last-terminated state."""
    pod = copy.deepcopy(pod)
    container: dict[str, Any] = {
        "name": "workspace",
        "ready": ready,
        "restartCount": restarts,
        "state": {"running": {}} if ready else {"waiting": {"reason": "CrashLoopBackOff"}},
    }
    if exit_code is not None:
        terminated = {"exitCode": exit_code, "message": message, "reason": "Error"}
        if current:
            container["state"] = {"terminated": terminated}
        else:
            container["lastState"] = {"terminated": terminated}
    pod["status"] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [container],
    }
    return pod


def ready_pod_status(ip: str = "10.0.0.7") -> dict[str, Any]:
    """A Running pod on ``ip`` with every container ready, as the kubelet reports it."""
    return {
        "phase": "Running",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {"name": "workspace", "ready": True, "restartCount": 0, "state": {"running": {}}}
        ],
    }


async def reconcile_until(h: Harness, phase: str, name: str = "ws1") -> dict[str, Any]:
    """Reconcile until the Workspace reports ``phase``, the kubelet ending the grace of a pod
    the controller deleted."""
    seen: dict[str, Any] = {}

    async def reached() -> bool:
        await h.reconcile(name)
        await h.kubelet_stops(name)
        seen.update(await h.workspace(name))
        return bool(seen.get("status", {}).get("phase") == phase)

    await eventually(reached, f"{name} to reach {phase}")
    return seen
