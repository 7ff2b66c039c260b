"""What a tenant writes on its own Workspace never decides what relay staging deletes.

The tenant can write any annotation on its Workspace, among them
``llmsafespaces.dev/relay-staged-providers``, where an earlier release kept its record of what
was staged and read back "what to revoke" from. Each slug there used to be deleted blind as
``llm-relay-env-<name>-<slug>``: ``w`` + ``prod-openai`` named the envelope of another
Workspace ``w-prod`` (provider ``openai``), and ``x/../llm-relay-hpke-key`` walked the request
path to the router's private key. The rule these tests hold: revocation deletes only envelopes
labelled with this Workspace's uid, whatever any annotation says; runs unchanged on a real
API server.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from dataclasses import replace

import pytest

from controller.staging.clients import CredentialSource
from controller.staging.desired import LEGACY_ANNOTATIONS, STAGED_PROVIDERS, recorded
from controller.staging.envelopes import (
    LABEL_MANAGED_BY,
    LABEL_PROVIDER_SLUG,
    LABEL_WORKSPACE_ID,
    MANAGED_BY,
    envelope_name,
)
from controller.staging.secrets import RelaySecrets
from controller.staging.staging_pass import RelayStagingPass
from tests.controller.staging.conftest import OPENAI_KEY, Stage, provider
from tests.support.secret_scope import controller_under_policy
from wspin.core.kinds import SECRETS, WORKSPACES
from wspin.core.objects import Obj
from wspin.kube.client import Kube

ROUTER_KEY = "llm-relay-hpke-key"
ENTRY = {"keyDigest": "0" * 12, "keyID": "hpke-g2", "modelsDigest": "0" * 12, "redactionID": "x"}
FORGED_SLUGS = ("prod-openai", f"x/../{ROUTER_KEY}")


def forged_record(*slugs: str) -> dict[str, str]:
    """The earlier release's annotations, as the tenant writes them."""
    sealed, revision, providers, staged_for = LEGACY_ANNOTATIONS
    return {
        sealed: "2",
        revision: "r000000000000",
        providers: json.dumps(dict.fromkeys(slugs, ENTRY)),
        staged_for: "anything/at-all",
    }


async def forge(stage: Stage, name: str, annotations: dict[str, str]) -> None:
    await stage.kube.patch(
        WORKSPACES, name, {"metadata": {"annotations": annotations}}, stage.namespace
    )


async def plant_router_key(stage: Stage) -> Obj:
    return await stage.kube.create(
        SECRETS,
        {
            "metadata": {"name": ROUTER_KEY},
            "data": {"private": base64.b64encode(b"router-private-key").decode()},
        },
        stage.relay_namespace,
    )


async def two_workspaces(stage: Stage) -> Obj:
    """``w`` staging openai, and tenant B's ``w-prod`` staging openai: B's envelope is
    ``llm-relay-env-w-prod-openai``, the name ``w`` + ``prod-openai`` also spells."""
    stage.providers.bound["w"] = [provider("openai", "openai", OPENAI_KEY, models=("gpt-4o",))]
    stage.providers.bound["w-prod"] = [
        provider("openai", "openai", "sk-tenant-b-0003", models=("gpt-4o",))
    ]
    for name in ("w", "w-prod"):
        await stage.workspace(name, owner=f"user-{name}")
        assert (await stage.run(name)).error is None
    envelope = await stage.envelope_secret("openai", "w-prod")
    assert envelope is not None
    assert envelope["metadata"]["name"] == envelope_name("w", "prod-openai")
    return envelope


@pytest.mark.parametrize("slug", FORGED_SLUGS)
async def test_a_forged_staged_providers_annotation_deletes_no_other_workspaces_secret(
    stage: Stage, slug: str
) -> None:
    """Rule: revocation deletes only envelopes labelled with this Workspace's uid; the
    annotation the tenant writes names nothing that is deleted."""
    tenant_b = await two_workspaces(stage)
    router_key = await plant_router_key(stage)

    await forge(stage, "w", forged_record(slug))
    report = await stage.run("w")

    assert report.error is None
    still = await stage.envelope_secret("openai", "w-prod")
    assert still is not None, "tenant B's envelope of Workspace w-prod was deleted"
    assert still["metadata"]["uid"] == tenant_b["metadata"]["uid"]
    key = await stage.kube.get_or_none(SECRETS, ROUTER_KEY, stage.relay_namespace)
    assert key is not None, "the router's private key was deleted"
    assert key["metadata"]["uid"] == router_key["metadata"]["uid"]
    assert await stage.envelope_secret("openai", "w") is not None  # w's own stays staged
    ws = await stage.get("w")
    assert not set(LEGACY_ANNOTATIONS) & set(ws["metadata"].get("annotations") or {})
    assert slug not in json.loads(recorded(ws)[STAGED_PROVIDERS])


async def test_a_forged_annotation_on_a_workspace_being_deleted_deletes_only_its_own(
    stage: Stage,
) -> None:
    """Rule: cleanup deletes the envelopes labelled with the Workspace's uid, nothing named by
    its annotations."""
    await two_workspaces(stage)
    await plant_router_key(stage)
    await forge(stage, "w", forged_record(*FORGED_SLUGS))

    await stage.staging.cleanup(await stage.get("w"))

    assert await stage.envelope_secret("openai", "w") is None
    assert await stage.envelope_secret("openai", "w-prod") is not None
    assert await stage.kube.get_or_none(SECRETS, ROUTER_KEY, stage.relay_namespace) is not None


async def test_an_earlier_releases_unbound_envelopes_are_revoked_after_the_upgrade(
    stage: Stage,
) -> None:
    """Upgrade: the first release labelled envelopes with the workspace name and slug only and
    kept its record in annotations. The first pass after the upgrade deletes that Workspace's
    envelopes no longer bound, selected by labels (its own uid, or its relay identity without
    any uid), and touches no other identity's."""
    await two_workspaces(stage)

    def unlabelled(workspace: str, slug: str) -> Obj:
        return {
            "metadata": {
                "name": envelope_name(workspace, slug),
                "labels": {
                    LABEL_WORKSPACE_ID: workspace,
                    LABEL_PROVIDER_SLUG: slug,
                    LABEL_MANAGED_BY: MANAGED_BY,
                },
            },
            "data": {"envelope": base64.b64encode(b"stg:v1:hpke:hpke-g1:AAAA").decode()},
        }

    await stage.kube.create(SECRETS, unlabelled("w", "anthropic"), stage.relay_namespace)
    await stage.kube.create(SECRETS, unlabelled("w-prod", "mistral"), stage.relay_namespace)
    await forge(stage, "w", forged_record("anthropic"))

    assert (await stage.run("w")).error is None

    assert await stage.envelope_secret("anthropic", "w") is None
    assert await stage.envelope_secret("openai", "w") is not None  # still bound
    assert await stage.envelope_secret("mistral", "w-prod") is not None
    assert await stage.envelope_secret("openai", "w-prod") is not None


async def test_the_pass_and_its_cleanup_write_only_what_the_secret_scope_policy_allows(
    stage: Stage, kube_as: Callable[..., Kube]
) -> None:
    """The controller's own writes (envelopes, their label-selected revocation and cleanup,
    the handoff, the bookkeeping) pass the chart's Secret-scope policy, acting as its service
    account; the forged annotation reaches nothing there either."""
    release = f"wspin-release-{uuid.uuid4().hex[:8]}"
    async with controller_under_policy(
        stage.kube,
        kube_as,
        release=release,
        relay=stage.relay_namespace,
        probe_namespace=stage.namespace,
    ) as controller:
        staging = RelayStagingPass(
            stage.config,
            controller,
            redactor=stage.redactor,
            relay=RelaySecrets(controller, stage.relay_namespace),
            source=CredentialSource(stage.config, ttl=0),
            clock=stage.clock,
        )
        try:
            as_controller = replace(stage, staging=staging)
            await two_workspaces(as_controller)
            await plant_router_key(stage)
            stage.providers.bound["w"] = []
            await forge(stage, "w", forged_record(*FORGED_SLUGS))
            assert (await as_controller.run("w")).error is None
            assert await stage.envelope_secret("openai", "w") is None  # revoked, by label
            assert await stage.envelope_secret("openai", "w-prod") is not None
            await staging.cleanup(await stage.get("w-prod"))
            assert await stage.envelope_secret("openai", "w-prod") is None
            assert await stage.kube.get_or_none(SECRETS, ROUTER_KEY, stage.relay_namespace)
        finally:
            await staging.close()
