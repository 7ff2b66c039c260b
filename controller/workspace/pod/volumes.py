"""The workspace pod's own volumes and mounts (pure data).

The PVC holds three subtrees mounted by subPath: ``workspace/`` (user data), ``home/``
(symlinks into tmpfs for credential paths) and ``tmp/`` (caches, init scripts; never
credentials); the sidecar adds ``platform/``, which only it mounts. Everything credential-
shaped lives in Memory-backed emptyDirs, so no plaintext reaches the node's disk or the PVC
and all of it is gone when the pod is. The delivery image volumes (``agentd``,
``opencode``) are not here: the admission webhook adds them.
"""

from __future__ import annotations

from typing import Final

from controller.types import Obj

WORKSPACE_VOLUME: Final = "workspace"
SANDBOX_CFG: Final = "sandbox-cfg"
SANDBOX_RUNTIME: Final = "sandbox-runtime"
PASSWORD_SECRET_VOLUME: Final = "pw-secret"  # noqa: S105 - a volume name
BOOTSTRAP_TOKEN: Final = "bootstrap-token"  # noqa: S105 - a volume name
FREE_MODELS: Final = "free-models"
AGENTD_CONFIG: Final = "agentd-config"
AGENTD_SECRETS: Final = "agentd-secrets"

WORKSPACE_PATH: Final = "/workspace"
SANDBOX_CFG_PATH: Final = "/sandbox-cfg"
SANDBOX_RUNTIME_PATH: Final = "/sandbox-runtime"
AGENTD_CONFIG_PATH: Final = "/agentd-config"
AGENTD_SECRETS_PATH: Final = "/agentd-secrets"
BOOTSTRAP_TOKEN_PATH: Final = "/var/run/bootstrap"  # noqa: S105 - a mount path

BOOTSTRAP_AUDIENCE: Final = "llmsafespace-api"
"""Audience of the projected token the bootstrap step presents to the API."""
BOOTSTRAP_TOKEN_SECONDS: Final = 600
"""Lifetime of that token: bootstrap runs once at start; the kubelet rotates it anyway."""
FREE_MODELS_CONFIGMAP: Final = "llmsafespaces-free-models"
"""The cluster-wide free-model catalogue the relay path pre-renders from (optional)."""


def password_secret_name(ws_name: str) -> str:
    """``workspace-pw-<ws>``: the workspace password, admin token and agentd password."""
    return f"workspace-pw-{ws_name}"


def mount(name: str, path: str, *, read_only: bool = False, sub_path: str = "") -> Obj:
    out: Obj = {"name": name, "mountPath": path}
    if sub_path:
        out["subPath"] = sub_path
    if read_only:
        out["readOnly"] = True
    return out


def _memory_dir(name: str, size: str) -> Obj:
    return {"name": name, "emptyDir": {"medium": "Memory", "sizeLimit": size}}


def password_secret_volume(ws_name: str, *, sidecar: bool) -> Obj:
    """The password Secret, as only ``platform-init`` mounts it: the password, and the admin
    token only in single-container mode. In sidecar mode the token is the sidecar's alone
    (uid 2000, from env); leaving it out of this volume means no uid-1000 container of the
    pod ever has a copy. ``agentdPassword`` is never projected here."""
    keys = ("password",) if sidecar else ("password", "admin-token")
    return {
        "name": PASSWORD_SECRET_VOLUME,
        "secret": {
            "secretName": password_secret_name(ws_name),
            "items": [{"key": key, "path": key} for key in keys],
        },
    }


def base_volumes(pvc_name: str, ws_name: str, *, relay: bool, sidecar: bool = False) -> list[Obj]:
    """PVC, the two tmpfs stores, the password Secret, the bootstrap token and, with a relay
    configured, the optional free-models catalogue."""
    volumes = [
        {"name": WORKSPACE_VOLUME, "persistentVolumeClaim": {"claimName": pvc_name}},
        # 32Mi: the bootstrap secrets.json of a workspace with many providers.
        _memory_dir(SANDBOX_CFG, "32Mi"),
        # 96Mi: credential output files and the symlink targets of $HOME credential paths.
        _memory_dir(SANDBOX_RUNTIME, "96Mi"),
        password_secret_volume(ws_name, sidecar=sidecar),
        {
            "name": BOOTSTRAP_TOKEN,
            "projected": {
                "sources": [
                    {
                        "serviceAccountToken": {
                            "audience": BOOTSTRAP_AUDIENCE,
                            "expirationSeconds": BOOTSTRAP_TOKEN_SECONDS,
                            "path": "token",
                        }
                    }
                ]
            },
        },
    ]
    if relay:
        # Optional: a pod created before the catalogue exists still starts.
        volumes.append(
            {"name": FREE_MODELS, "configMap": {"name": FREE_MODELS_CONFIGMAP, "optional": True}}
        )
    return volumes


def sidecar_volumes() -> list[Obj]:
    """Stores split by consumer: ``agentd-config`` (agent config, read-only to the workspace
    container) and ``agentd-secrets`` (sidecar only: reload cache with plaintext batches)."""
    return [_memory_dir(AGENTD_CONFIG, "8Mi"), _memory_dir(AGENTD_SECRETS, "16Mi")]


def workspace_mounts() -> list[Obj]:
    """The workspace container's mounts of the pod's own volumes."""
    return [
        mount(WORKSPACE_VOLUME, WORKSPACE_PATH, sub_path="workspace"),
        mount(SANDBOX_CFG, SANDBOX_CFG_PATH, read_only=True),
        mount(SANDBOX_RUNTIME, SANDBOX_RUNTIME_PATH),
        mount(WORKSPACE_VOLUME, "/tmp", sub_path="tmp"),  # noqa: S108 - the PVC's tmp/ subtree
        mount(WORKSPACE_VOLUME, "/home/sandbox", sub_path="home"),
    ]
