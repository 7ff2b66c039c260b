"""A handoff Secret the controller did not write is never reused (runs unchanged on a real
cluster): in a namespace several users share, one could put ``workspace-relay-<ws>`` there
first, with entries matching the key, upstream and models but a token and router path of its
own, and the Workspace's pod would be handed them."""

from __future__ import annotations

import base64
import json
from typing import Any

from controller.staging.handoff import handoff_name
from tests.controller.staging.conftest import Stage, two_providers
from wspin.core.contract import LABEL_WORKSPACE_UID
from wspin.core.kinds import SECRETS

PLANTED_TOKEN = "planted-token-of-another-user"


def planted(real: dict[str, Any], secret: dict[str, Any]) -> dict[str, Any]:
    """The controller's own handoff with each entry's token and router path swapped, in a
    Secret without the controller-only label (what a tenant can create)."""
    for entry in real["providers"]:
        entry["token"] = PLANTED_TOKEN
        entry["routerPath"] = "/w/victim/" + entry["providerSlug"] + "/v1"
    meta = secret["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != LABEL_WORKSPACE_UID}
    return {
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": meta["ownerReferences"],  # the creator writes these as it likes
        },
        "type": "Opaque",
        "data": {"handoff": base64.b64encode(json.dumps(real).encode()).decode()},
    }


async def test_a_planted_handoff_is_overwritten_with_fresh_tokens(stage: Stage) -> None:
    stage.providers.bound["ws-a"] = two_providers()
    await stage.workspace()
    await stage.run()
    assert stage.mints() == 2
    name = handoff_name("ws-a")
    secret = await stage.kube.get(SECRETS, name, stage.namespace)
    body = planted(await stage.handoff(), secret)
    await stage.kube.delete(SECRETS, name, stage.namespace)
    await stage.kube.create(SECRETS, body, stage.namespace)

    await stage.run()

    assert stage.mints() == 4  # nothing of the planted handoff was reused
    handoff = await stage.handoff()
    for entry in handoff["providers"]:
        assert entry["token"] != PLANTED_TOKEN
        assert entry["routerPath"] == f"/w/ws-a/{entry['providerSlug']}/v1"
    rewritten = await stage.kube.get(SECRETS, name, stage.namespace)
    uid = (await stage.get())["metadata"]["uid"]
    assert rewritten["metadata"]["labels"][LABEL_WORKSPACE_UID] == uid
