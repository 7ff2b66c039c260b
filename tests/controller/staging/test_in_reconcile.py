"""The staging pass inside the Workspace reconcile: catch-up of a workspace that predates
arming, flag off, an incomplete revocation retried with its condition already written,
cleanup on deletion, and the wiring that builds the pass from the armed config."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry

from controller.settings import ControllerSettings, RuntimeSettings
from controller.setup import new_manager, setup_controllers
from controller.staging.desired import LEGACY_ANNOTATIONS, STATUS_FIELD
from controller.staging.envelopes import REDACTION_GROUP_PREFIX
from controller.staging.handoff import handoff_name
from tests.controller.staging.conftest import Stage, condition, make_config, two_providers
from tests.controller.workspace.conftest import SETTINGS, Harness
from tests.controller.workspace.conftest import harness as harness
from tests.controller.workspace.factories import (
    TEST_KEYS,
    publish_runtime,
    ready_pod_status,
    reconcile_until,
)
from tests.kubeapi import KubeServer
from tests.support.owners import recorded
from tests.support.waiting import eventually
from wspin.core.errors import TransientError
from wspin.core.kinds import PODS, SECRETS, WORKSPACES
from wspin.core.redact import Redactor
from wspin.kube.client import Kube


async def active(harness: Harness) -> None:
    await harness.apply(owner={"userID": "user-1"})
    await harness.reconcile()
    await harness.set_pod_status(await harness.pod_name(), ready_pod_status())
    await reconcile_until(harness, "Active")


async def test_an_active_workspace_that_predates_arming_catches_up(
    harness: Harness, stage: Stage
) -> None:
    stage.providers.bound["ws1"] = two_providers()
    await active(harness)
    assert await stage.handoff_raw("ws1") is None
    harness.use(staging=stage.staging)

    await harness.reconcile()

    handoff = await stage.handoff("ws1")
    assert [p["token"] for p in handoff["providers"]] == ["lrt-fake-1", "lrt-fake-2"]
    assert await stage.envelope_secret("openai", "ws1") is not None
    staged = condition(await harness.workspace(), "CredentialsStaged")
    assert staged is not None and staged["status"] == "True"
    raw = await stage.handoff_raw("ws1")
    await harness.reconcile()
    assert await stage.handoff_raw("ws1") == raw


async def test_with_staging_off_nothing_relay_related_appears(
    harness: Harness, stage: Stage
) -> None:
    stage.providers.bound["ws1"] = two_providers()
    await active(harness)
    await harness.reconcile()
    ws = await harness.workspace()
    assert not set(LEGACY_ANNOTATIONS) & set(ws["metadata"].get("annotations") or {})
    assert STATUS_FIELD not in (ws.get("status") or {})
    assert condition(ws, "CredentialsStaged") is None
    assert await stage.handoff_raw("ws1") is None
    relay = (await stage.kube.list(SECRETS, stage.relay_namespace))["items"]
    assert [s["metadata"]["name"] for s in relay] == ["llm-relay-hpke-pub"]  # the router's own
    assert stage.providers.requests == []


async def test_an_incomplete_revocation_is_recorded_and_then_retried(
    harness: Harness, stage: Stage, kube_server: KubeServer
) -> None:
    stage.providers.bound["ws1"] = two_providers()
    await active(harness)
    harness.use(staging=stage.staging)
    await harness.reconcile()
    stage.providers.bound["ws1"] = two_providers()[:1]
    kube_server.fail_next(500, method="DELETE", path=f"/api/v1/namespaces/{stage.relay_namespace}")

    with pytest.raises(TransientError, match="revocation incomplete"):
        await harness.reconcile()

    stale = condition(await harness.workspace(), "CredentialStale")
    assert stale is not None and "RETAINED" in stale["message"]
    await harness.settle()
    await harness.reconcile()
    assert await stage.envelope_secret("local", "ws1") is None


async def test_deleting_the_workspace_deletes_its_envelopes(harness: Harness, stage: Stage) -> None:
    stage.providers.bound["ws1"] = two_providers()
    await active(harness)
    harness.use(staging=stage.staging)
    await harness.reconcile()
    await harness.kube.delete(WORKSPACES, "ws1", harness.namespace)
    for _ in range(100):
        await harness.reconcile()
        if await harness.kube.get_or_none(WORKSPACES, "ws1", harness.namespace) is None:
            break
        await asyncio.sleep(0.05)
    assert await stage.envelope_secret("openai", "ws1") is None
    assert await stage.envelope_secret("local", "ws1") is None
    assert stage.redactor.groups() == frozenset()


async def test_an_armed_config_gets_a_staging_pass_wired_in(kube: Kube, stage: Stage) -> None:
    settings = ControllerSettings(
        runtime=RuntimeSettings(health_port=0, metrics_port=0, bind_host="127.0.0.1"),
        workspace=SETTINGS,
    )
    config = make_config(stage.router.url, stage.relay_namespace, stage.providers.url, 3600)
    stage.providers.bound["ws1"] = two_providers()
    await publish_runtime(kube)
    manager = new_manager(kube, settings, registry=CollectorRegistry())
    redactor = Redactor()
    setup_controllers(
        manager, settings, credential_keys=TEST_KEYS, relay_staging=config, redactor=redactor
    )
    running = asyncio.create_task(manager.run())
    try:
        ws = await kube.create(
            WORKSPACES,
            recorded(
                {
                    "metadata": {"name": "ws1", "namespace": stage.namespace},
                    "spec": {
                        "runtime": "python",
                        "storage": {"size": "1Gi"},
                        "owner": {"userID": "user-1"},
                    },
                }
            ),
        )
        pod_name = f"ws1-{ws['metadata']['uid'][:8]}"

        async def pod_exists() -> bool:
            return await kube.get_or_none(PODS, pod_name, stage.namespace) is not None

        await eventually(pod_exists, "the workspace pod")
        await kube.patch(
            PODS, pod_name, {"status": ready_pod_status()}, stage.namespace, sub="status"
        )

        async def handed_off() -> bool:
            secret = await kube.get_or_none(SECRETS, handoff_name("ws1"), stage.namespace)
            return secret is not None

        await eventually(handed_off, "the handoff Secret")
        # The process's redactor now knows both staged keys.
        assert len(redactor.groups()) == 2
        assert all(group.startswith(REDACTION_GROUP_PREFIX) for group in redactor.groups())
    finally:
        manager.stop()
        await asyncio.wait_for(running, 10)


async def test_an_active_workspace_stays_fresh_with_no_event(
    harness: Harness, stage: Stage
) -> None:
    """Nothing changes on the Workspace or its pod: the reconcile's own requeue brings the
    pass back, which renews tokens past half their TTL and revokes an unbound credential."""
    stage.providers.bound["ws1"] = two_providers()
    await active(harness)
    harness.use(staging=stage.staging)
    first = await harness.reconcile()
    assert first is not None and first.after <= 120  # the default staleness bound
    minted = stage.mints()

    # Half the one-hour TTL later, plus the widest renewal spread: every token renewed.
    stage.clock.advance(timedelta(minutes=30, seconds=6 * 60 + 1))
    again = await harness.reconcile()
    assert again is not None and again.after <= 120
    assert stage.mints() == minted + 2

    # The owner unbinds one credential; the next timed pass revokes it.
    stage.providers.bound["ws1"] = two_providers()[:1]
    stage.clock.advance(timedelta(seconds=again.after))
    await harness.reconcile()
    assert await stage.envelope_secret("local", "ws1") is None
    assert await stage.envelope_secret("openai", "ws1") is not None
