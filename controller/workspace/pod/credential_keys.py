"""The key the workspace credentials are derived from, kept in the controller's own namespace.

Every workspace's password, agentd admin token and sidecar control-plane password is
``HMAC-SHA256(key, "<purpose>:<workspace uid>")``, cut to 32 lowercase hex. The controller can
therefore recompute any workspace's values at any time (the probes' bearer, agentd's admin
calls) without reading a Secret in a workspace namespace, and it writes each workspace's
``workspace-pw-<ws>`` whole without ever reading it back: a Secret a tenant planted at that
name is overwritten, never used.

The key lives in the Secret ``wspin-workspace-credentials`` in the controller's namespace
(read by name: a Role with ``resourceNames``). The first controller to start creates it; a
replica that loses that race reads the winner's. It holds one or more keys, each under
``key-<id>``, and ``active``, the id new pods are built with. Each pod records the id its
values came from (``llmsafespaces.dev/credentials-key``), so adding a key and making it
active (then restarting the controller) leaves running pods working and builds new pods with
the new key; a key removed while pods still use it has those pods recreated.

The Secret's creation time also dates this release's first start in the cluster: objects that
earlier releases created for a Workspace, before the ownership label existed, are older than
it (``ownership``: they are the Workspace's without the label; anything unlabelled and newer
was not created by the controller).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from wspin.core.clock import parse_time
from wspin.core.errors import AlreadyExists, ConfigError, Forbidden
from wspin.core.kinds import SECRETS
from wspin.core.logs import fields
from wspin.core.objects import Obj
from wspin.kube.client import Kube

log = logging.getLogger("controller.workspace")

KEY_SECRET: Final = "wspin-workspace-credentials"  # noqa: S105 - a Secret's name
"""The Secret in the controller's namespace that holds the derivation keys."""
ACTIVE: Final = "active"
"""Data key naming the key id new pods are built with."""
KEY_PREFIX: Final = "key-"
FIRST_KEY_ID: Final = "1"
KEY_BYTES: Final = 32
"""A generated key's size (256 bits); a key an operator adds must be at least this long."""
MAX_KEY_BYTES: Final = 1024
MAX_KEYS: Final = 32
"""Bounds on what is read from the Secret: rotation needs two keys at a time, not hundreds."""
VALUE_HEX: Final = 32
"""Each derived value is 32 lowercase hex (128 bits), the shape agentd and the API expect."""
_KEY_ID = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")

ROTATE_FIX: Final = (
    f"fix the Secret {KEY_SECRET} in the controller's namespace: `{ACTIVE}` names an id whose "
    f"`{KEY_PREFIX}<id>` holds at least {KEY_BYTES} random bytes (see Rotating the workspace "
    "credentials key in charts/wspin/README.md), or delete it to have a new key generated "
    "(every workspace pod is then recreated)"
)


@dataclass(frozen=True)
class CredentialKeys:
    """The derivation keys by id, and the id new pods use."""

    active: str
    keys: dict[str, bytes] = field(repr=False)
    created: datetime | None = None
    """When the key Secret was created: the first start of a controller that labels what it
    creates (None: unknown, so nothing predates it)."""

    def knows(self, key_id: str) -> bool:
        return key_id in self.keys

    def derive(self, key_id: str, purpose: str, uid: str) -> str:
        """The value for ``purpose`` of the Workspace with ``uid``, from key ``key_id``
        (KeyError when the key is gone)."""
        digest = hmac.new(self.keys[key_id], f"{purpose}:{uid}".encode(), hashlib.sha256)
        return digest.hexdigest()[:VALUE_HEX]


def parse_key_secret(secret: Obj) -> CredentialKeys:
    """The keys in the Secret's ``data``; ``ConfigError`` naming what to fix otherwise."""
    data = secret.get("data")
    if not isinstance(data, dict):
        raise ConfigError(f"Secret {KEY_SECRET} has no data", ROTATE_FIX)
    keys: dict[str, bytes] = {}
    for name, value in data.items():
        if not isinstance(name, str) or not name.startswith(KEY_PREFIX):
            continue
        key_id = name.removeprefix(KEY_PREFIX)
        if not _KEY_ID.match(key_id):
            raise ConfigError(
                f"Secret {KEY_SECRET}: {name!r} is not a key name (key-<id>, id of lowercase "
                "letters, digits and dashes, at most 32)",
                ROTATE_FIX,
            )
        raw = _decoded(value, name)
        if not KEY_BYTES <= len(raw) <= MAX_KEY_BYTES:
            raise ConfigError(
                f"Secret {KEY_SECRET}: {name} holds {len(raw)} bytes, not "
                f"{KEY_BYTES}..{MAX_KEY_BYTES}",
                ROTATE_FIX,
            )
        keys[key_id] = raw
        if len(keys) > MAX_KEYS:
            raise ConfigError(f"Secret {KEY_SECRET} holds more than {MAX_KEYS} keys", ROTATE_FIX)
    active = _decoded(data.get(ACTIVE), ACTIVE).decode("utf-8", "replace").strip()
    if active not in keys:
        raise ConfigError(
            f"Secret {KEY_SECRET}: `{ACTIVE}` names key {active!r}, which it does not hold",
            ROTATE_FIX,
        )
    created = parse_time((secret.get("metadata") or {}).get("creationTimestamp"))
    return CredentialKeys(active, keys, created)


def _decoded(value: object, name: str) -> bytes:
    if not isinstance(value, str):
        raise ConfigError(f"Secret {KEY_SECRET}: {name} is missing", ROTATE_FIX)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"Secret {KEY_SECRET}: {name} is not base64", ROTATE_FIX) from None


def new_key_secret(namespace: str) -> Obj:
    """A fresh Secret with one random key, active."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": KEY_SECRET,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/name": "wspin",
                "app.kubernetes.io/component": "controller",
            },
        },
        "data": {
            ACTIVE: base64.b64encode(FIRST_KEY_ID.encode()).decode(),
            KEY_PREFIX + FIRST_KEY_ID: base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode(),
        },
    }


async def load_credential_keys(kube: Kube, namespace: str) -> CredentialKeys:
    """Read the key Secret, creating it first when it is missing. Safe for replicas starting
    together: the one whose create loses reads the winner's. ``ConfigError`` (the process
    exits 1) when the Secret is malformed or the controller may not read it."""
    try:
        found = await kube.get_or_none(SECRETS, KEY_SECRET, namespace)
        if found is None:
            try:
                found = await kube.create(SECRETS, new_key_secret(namespace), namespace)
                log.info(
                    "generated the workspace credentials key",
                    extra=fields(secret=f"{namespace}/{KEY_SECRET}"),
                )
            except AlreadyExists:
                found = await kube.get_or_none(SECRETS, KEY_SECRET, namespace)
    except Forbidden as err:
        raise ConfigError(
            f"cannot read or create the Secret {namespace}/{KEY_SECRET}: {err.message}",
            "install the chart's controller Role (get on that Secret by name, create on "
            "Secrets in the controller's namespace)",
        ) from None
    if found is None:
        raise ConfigError(
            f"Secret {namespace}/{KEY_SECRET} vanished while it was being read", ROTATE_FIX
        )
    return parse_key_secret(found)
