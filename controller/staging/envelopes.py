"""Envelope Secrets in the relay namespace: ``llm-relay-env-<workspace>-<slug>``.

Labelled with the workspace and the provider slug (the router's informer ignores Secrets
lacking either), no owner reference (owners across namespaces are illegal, so their lifetime
is managed by the pass: revocation and termination delete them). Written blind and never
read back: the chart grants create, update and delete there, never get on envelopes.
"""

from __future__ import annotations

import base64
from typing import Any, Final

from controller.staging.desired import go_json
from controller.staging.secrets import RelaySecrets
from wspin.resources import AlreadyExists

Obj = dict[str, Any]

ENVELOPE_KEY: Final = "envelope"
MODELS_KEY: Final = "models"
LABEL_WORKSPACE_ID: Final = "llmsafespaces.dev/workspace-id"
LABEL_PROVIDER_SLUG: Final = "llmsafespaces.dev/provider-slug"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "wspin-controller"


def envelope_name(workspace: str, slug: str) -> str:
    return f"llm-relay-env-{workspace}-{slug}"


def envelope_secret(workspace: str, slug: str, envelope: str, models: list[str]) -> Obj:
    return {
        "metadata": {
            "name": envelope_name(workspace, slug),
            "labels": {
                LABEL_WORKSPACE_ID: workspace,
                LABEL_PROVIDER_SLUG: slug,
                LABEL_MANAGED_BY: MANAGED_BY,
            },
        },
        "type": "Opaque",
        "data": {
            ENVELOPE_KEY: base64.b64encode(envelope.encode()).decode(),
            MODELS_KEY: base64.b64encode(go_json(models).encode()).decode(),
        },
    }


async def write_envelope(secrets: RelaySecrets, body: Obj) -> None:
    """Create, or replace whatever holds the name: blind, without a read.

    Create-then-replace instead of the reference's delete-then-create, so the router never
    sees a moment without an envelope (a request then would fail closed for nothing).
    """
    try:
        await secrets.create(dict(body))
    except AlreadyExists:
        await secrets.update(dict(body))


async def delete_envelope(secrets: RelaySecrets, workspace: str, slug: str) -> None:
    """Blind delete; an envelope already gone counts as deleted."""
    await secrets.delete(envelope_name(workspace, slug))
