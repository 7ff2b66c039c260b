"""Revocation and the staleness deadline hold in every phase that holds staged material.

A credential unbound while the pod waits to be scheduled (unschedulable, or waiting for
capacity) or while the Workspace is suspended loses its envelope within the staleness bound,
exactly as with a running pod: the pass runs, and the reconcile asks to come back by the
bound, with no event on the Workspace or its pod.
"""

from __future__ import annotations

import dataclasses

from controller.types import Requeue
from tests.controller.staging.conftest import Stage, condition, two_providers
from tests.controller.workspace.conftest import SETTINGS, Harness
from tests.controller.workspace.conftest import harness as harness
from tests.controller.workspace.factories import reconcile_until
from wspin.core.kinds import PODS, WORKSPACES

BOUND = 120.0  # the default --relay-revocation-staleness-bound


async def test_a_credential_unbound_while_the_pod_is_never_scheduled_is_revoked_in_time(
    harness: Harness, stage: Stage
) -> None:
    stage.providers.bound["ws1"] = two_providers()
    harness.use(staging=stage.staging)
    await harness.apply(owner={"userID": "user-1"})

    first = await harness.reconcile()  # stages, then creates a pod no node will ever take

    pod = await harness.kube.get(PODS, await harness.pod_name(), harness.namespace)
    assert not (pod.get("spec") or {}).get("nodeName")
    assert await stage.envelope_secret("local", "ws1") is not None
    assert first is not None and first.after <= BOUND

    stage.providers.bound["ws1"] = two_providers()[:1]  # the owner unbinds one credential
    stage.clock.advance(first.after)
    again = await harness.reconcile()  # the deadline, nothing else: no event arrived

    ws = await harness.workspace()
    assert ws["status"]["phase"] == "Pending"
    assert await stage.envelope_secret("local", "ws1") is None
    assert await stage.envelope_secret("openai", "ws1") is not None
    assert [p["providerSlug"] for p in (await stage.handoff("ws1"))["providers"]] == ["openai"]
    stale = condition(ws, "CredentialStale")
    assert stale is not None and stale["reason"] == "StaleRevoked"
    assert again is not None and again.after <= BOUND  # and the bound keeps holding


async def test_a_credential_unbound_while_suspended_is_revoked_in_time(
    harness: Harness, stage: Stage
) -> None:
    stage.providers.bound["ws1"] = two_providers()
    harness.use(staging=stage.staging)
    await harness.apply(owner={"userID": "user-1"})
    await harness.reconcile()
    await harness.kube.patch(WORKSPACES, "ws1", {"spec": {"suspend": True}}, harness.namespace)
    await harness.settle()
    await reconcile_until(harness, "Suspended")

    stage.providers.bound["ws1"] = two_providers()[:1]
    stage.clock.advance(BOUND)
    after = await harness.reconcile()

    assert (await harness.workspace())["status"]["phase"] == "Suspended"
    assert await stage.envelope_secret("local", "ws1") is None
    assert after is not None and after.after <= BOUND


async def test_a_workspace_whose_spec_no_longer_builds_keeps_revocation(
    harness: Harness, stage: Stage
) -> None:
    """Failed (the pod cannot be built): the staged material stays revocable."""
    stage.providers.bound["ws1"] = two_providers()
    harness.use(staging=stage.staging)
    await harness.apply(owner={"userID": "user-1"})
    await harness.reconcile()
    await harness.kube.patch(
        WORKSPACES, "ws1", {"spec": {"podSecurityContext": {"runAsUser": -5}}}, harness.namespace
    )
    await harness.settle()
    stage.providers.bound["ws1"] = two_providers()[:1]
    stage.clock.advance(BOUND)
    after = await harness.reconcile()
    assert (await harness.workspace())["status"]["phase"] == "Failed"
    assert await stage.envelope_secret("local", "ws1") is None
    assert after is not None and after.after <= BOUND


async def test_a_workspace_in_an_excluded_namespace_is_never_staged(
    harness: Harness, stage: Stage
) -> None:
    stage.providers.bound["ws1"] = two_providers()
    harness.use(
        staging=stage.staging,
        settings=dataclasses.replace(
            SETTINGS, excluded_namespaces=frozenset({"kube-system", harness.namespace})
        ),
    )
    await harness.apply(owner={"userID": "user-1"})
    assert await harness.reconcile() == Requeue(30.0)  # looked at again after the backoff
    assert (await harness.workspace())["status"]["phase"] == "Failed"
    assert stage.providers.requests == [] and stage.mints() == 0
    assert await stage.handoff_raw("ws1") is None
