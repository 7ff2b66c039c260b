"""A workspace's credentials: derived, written whole, never read back.

``workspace-pw-<ws>`` carries ``password`` (the workspace password; agentd's user API and
opencode), ``admin-token`` (the bearer of agentd's admin API: readyz, statusz) and
``agentdPassword`` (the sidecar's control-plane password, never wired into the workspace
container). Their names and keys are a contract: the API service reads this Secret.

Each value is derived from the controller's key and the Workspace's uid
(``credential_keys``), so the controller knows them without reading the Secret (it has no
read access to Secrets outside its own namespace). The Secret is written before every pod
build: created, or replaced whole when something is already at its name. A Secret planted
before the Workspace's first pod, or one an earlier release left without a key, ends up with
exactly the derived values; the pod records the key id they came from
(``ANNOTATION_CREDENTIALS_KEY``), and its probes carry the admin token as a literal bearer
(the kubelet cannot read a Secret for a probe header).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from typing import Final

from controller.types import Obj
from controller.workspace.pod.credential_keys import CredentialKeys
from controller.workspace.pod.names import names, owned_metadata
from wspin.core.contract import MAIN_CONTAINER
from wspin.core.workspace import CREDENTIALS_ROTATION, WorkspaceSpec, WorkspaceStatus

PASSWORD: Final = "password"  # noqa: S105 - a data key
ADMIN_TOKEN: Final = "admin-token"  # noqa: S105 - a data key
AGENTD_PASSWORD: Final = "agentdPassword"  # noqa: S105 - a data key
KEYS: Final = (PASSWORD, ADMIN_TOKEN, AGENTD_PASSWORD)

ANNOTATION_CREDENTIALS_KEY: Final = "llmsafespaces.dev/credentials-key"
"""The id of the key a pod's credentials were derived from (written by the controller)."""
ANNOTATION_CREDENTIALS_ROTATION: Final = "llmsafespaces.dev/credentials-rotation"
"""The admin-token rotation a pod was built with (absent: 0, a pod of an earlier release)."""
STATUS_ROTATION: Final = CREDENTIALS_ROTATION
"""``status.credentialsRotation``: the highest admin-token rotation a pod was built with.
Only the controller writes status, and it never goes down, so a token once rotated away
never comes back (not even when ``spec.restartGeneration`` is set back)."""


@dataclass(frozen=True)
class WorkspaceCredentials:
    """One Workspace's values, derived from one key."""

    key_id: str
    password: str = field(repr=False)
    admin_token: str = field(repr=False)
    agentd_password: str = field(repr=False)
    rotation: int = 0
    """The admin token's rotation (``credentials_rotation``)."""

    def values(self) -> dict[str, str]:
        """The Secret's data, by key."""
        return {
            PASSWORD: self.password,
            ADMIN_TOKEN: self.admin_token,
            AGENTD_PASSWORD: self.agentd_password,
        }

    def redact(self, text: str) -> str:
        """``text`` with every value blanked (API error messages may quote a body)."""
        for value in self.values().values():
            text = text.replace(value, "[redacted]")
        return text


def whole(value: object) -> int:
    """``value`` when it is a whole number >= 0, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def credentials_rotation(ws: Obj) -> int:
    """The admin-token rotation a pod built now gets: every recycle the Workspace asks for
    (``spec.restartGeneration``, the force-recycle included) advances it, and the status keeps
    the highest one built, so it never goes down."""
    return max(
        WorkspaceSpec.of(ws.get("spec")).restart_generation_or_zero,
        WorkspaceStatus.of(ws.get("status")).credentials_rotation,
    )


def derive_credentials(
    keys: CredentialKeys, ws: Obj, key_id: str | None = None, rotation: int | None = None
) -> WorkspaceCredentials:
    """``ws``'s values from key ``key_id`` (the active key by default) and admin-token
    rotation ``rotation`` (``credentials_rotation`` by default).

    The admin token is HMAC(key, uid and rotation): once read (it is in the pod's probe
    headers, which the ``view`` role shows), it stays valid only until the next recycle or
    key rotation, not for the Workspace's whole life. Rotation 0 derives what releases
    before rotations did, so an upgrade recreates no pod. The password and the sidecar's
    password are the user's and the API's, and do not rotate with it."""
    chosen = key_id or keys.active
    uid = str(ws["metadata"]["uid"])
    turn = credentials_rotation(ws) if rotation is None else rotation
    return WorkspaceCredentials(
        chosen,
        password=keys.derive(chosen, PASSWORD, uid),
        admin_token=keys.derive(chosen, ADMIN_TOKEN, f"{uid}:{turn}" if turn else uid),
        agentd_password=keys.derive(chosen, AGENTD_PASSWORD, uid),
        rotation=turn,
    )


def desired_password_secret(ws: Obj, credentials: WorkspaceCredentials) -> Obj:
    """The whole Secret for ``ws`` (``stringData``: the API server stores it base64-encoded
    under ``data``, and a replace drops any key it does not name)."""
    metadata = owned_metadata(ws, names(ws).secret)
    metadata["annotations"] = {ANNOTATION_CREDENTIALS_KEY: credentials.key_id}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": metadata,
        "stringData": credentials.values(),
    }


def pod_credentials(pod: Obj, ws: Obj, keys: CredentialKeys) -> WorkspaceCredentials | str:
    """The credentials a running pod was built with, or why it has none the controller can
    vouch for (then it is recreated).

    The annotation names the key; the pod's own readiness probe, immutable once created,
    must carry the admin token that key derives, so an edited annotation never makes the
    controller believe a value the pod does not hold."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    key_id = annotations.get(ANNOTATION_CREDENTIALS_KEY)
    if not isinstance(key_id, str) or not key_id:
        return "the pod was built without a credentials key the controller knows"
    if not keys.knows(key_id):
        return f"the pod's credentials key {key_id!r} was retired"
    turn = str(annotations.get(ANNOTATION_CREDENTIALS_ROTATION, "0"))
    if not turn.isdigit() or len(turn) > 18:
        return "the pod's credentials rotation is not a whole number"
    credentials = derive_credentials(keys, ws, key_id, int(turn))
    # Bytes: a header a foreign hand wrote may hold any character, and comparing non-ASCII
    # text raises instead of answering.
    held = _readiness_bearer(pod).encode("utf-8", "replace")
    if not hmac.compare_digest(held, f"Bearer {credentials.admin_token}".encode()):
        return "the pod's probes do not carry its admin token"
    return credentials


def _readiness_bearer(pod: Obj) -> str:
    """The Authorization header of the workspace container's readiness probe ("" if none)."""
    for container in (pod.get("spec") or {}).get("containers") or ():
        if not isinstance(container, dict) or container.get("name") != MAIN_CONTAINER:
            continue
        probe = container.get("readinessProbe") or {}
        action = probe.get("httpGet") if isinstance(probe, dict) else None
        for header in (action or {}).get("httpHeaders") or ():
            if isinstance(header, dict) and header.get("name") == "Authorization":
                return str(header.get("value") or "")
    return ""
