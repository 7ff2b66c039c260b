"""The workspace password Secret ``workspace-pw-<ws>``: created once, never read back.

It carries three independent random values: ``password`` (the workspace's own password,
installed 0600 by ``platform-init``), ``admin-token`` (the bearer of agentd's admin API and
its readiness probe) and ``agentdPassword`` (the sidecar's control-plane secret, which never
reaches the workspace container). The pod only references it (secret volume, secretKeyRef),
so the values exist in the Secret and in the pod's memory, never in a pod spec, log line or
Event. Created before the pod and owned by the Workspace (garbage collection removes it); an
existing Secret is kept, so a recreated pod keeps its credentials.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Final

from controller.types import Obj
from controller.workspace.pod import names, owner_reference, selector_labels
from controller.workspace.volumes import password_secret_name

KEYS: Final = ("password", "admin-token", "agentdPassword")
TOKEN_BYTES: Final = 32
"""256 bits of randomness per value."""


def random_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def desired_password_secret(ws: Obj, token: Callable[[], str] = random_token) -> Obj:
    """The Secret for ``ws`` with a fresh ``token()`` per key (``stringData``: the API server
    stores it base64-encoded under ``data``)."""
    name = str(ws["metadata"]["name"])
    names(ws)  # the same preconditions as the pod (a uid to own it by)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": password_secret_name(name),
            "namespace": ws["metadata"].get("namespace", ""),
            "labels": selector_labels(name),
            "ownerReferences": [owner_reference(ws)],
        },
        "stringData": {key: token() for key in KEYS},
    }
