"""A Workspace stored before the owner record existed gets it once, as the operator chose:
``adopt`` has the controller ask the webhook for it (one write, never repeated), ``hold``
writes nothing and leaves relay staging off until a trusted writer confirms."""

from __future__ import annotations

from dataclasses import replace

from tests.controller.workspace.conftest import Harness
from wspin.core.kinds import WORKSPACES
from wspin.core.owners import ANNOTATION_VERIFIED_OWNER


async def unrecorded(harness: Harness) -> None:
    created = await harness.kube.create(
        WORKSPACES,
        {
            "metadata": {"name": "ws1", "namespace": harness.namespace},
            "spec": {"runtime": "python", "storage": {"size": "1Gi"}, "owner": {"userID": "u1"}},
        },
    )
    await harness.synced(harness.workspaces, "ws1", created)


async def test_adopt_asks_for_the_record_once(harness: Harness) -> None:
    await unrecorded(harness)
    await harness.reconcile()
    asked = await harness.workspace()
    # Without the webhook in front the request itself is stored; with it, the record (see
    # tests/webhook/test_workspace_owner.py).
    assert asked["metadata"]["annotations"][ANNOTATION_VERIFIED_OWNER] == "adopt"
    version = asked["metadata"]["resourceVersion"]
    await harness.reconcile()
    await harness.reconcile()
    again = await harness.workspace()
    assert again["metadata"]["annotations"][ANNOTATION_VERIFIED_OWNER] == "adopt"
    assert "finalizers" in again["metadata"] and again["metadata"]["resourceVersion"] != version


async def test_hold_asks_for_nothing(harness: Harness) -> None:
    harness.use(settings=replace(harness.reconciler.deps.settings, owner_record_upgrade="hold"))
    await unrecorded(harness)
    await harness.reconcile()
    held = await harness.workspace()
    assert ANNOTATION_VERIFIED_OWNER not in (held["metadata"].get("annotations") or {})
