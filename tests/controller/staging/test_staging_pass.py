"""The staging pass against the Kubernetes API, the fake router and a fake credential source:
staging, skipping, revocation, rotation, renewal, mint failures, steady state, bookkeeping
loss, cleanup. Envelopes are opened with the fake router's private key."""

from __future__ import annotations

import base64
import json
import re
from datetime import datetime, timedelta
from typing import Any

import pytest

from controller.staging.desired import (
    SEALED_GENERATION,
    STAGED_PROVIDERS,
    STAGED_REVISION,
    STATUS_FIELD,
    recorded,
)
from controller.staging.envelopes import (
    LABEL_PROVIDER_SLUG,
    LABEL_WORKSPACE_ID,
    EnvelopeError,
    open_envelope,
)
from controller.staging.handoff import handoff_name
from controller.staging.secrets import HPKE_PUB_SECRET, MINT_KEY_SECRET, secret_value
from tests.controller.staging.conftest import (
    COMPAT_KEY,
    OPENAI_KEY,
    Providers,
    Stage,
    condition,
    provider,
    two_providers,
)
from tests.kubeapi import KubeServer
from wspin.core.contract import LABEL_WORKSPACE_UID
from wspin.core.errors import TransientError
from wspin.core.kinds import EVENTS, SECRETS, WORKSPACES


def annotations_on(ws: dict[str, Any]) -> dict[str, str]:
    """The bookkeeping as recorded in the Workspace's status."""
    return recorded(ws)


async def events(stage: Stage, reason: str) -> list[dict[str, Any]]:
    listing = await stage.kube.list(EVENTS, stage.namespace)
    return [e for e in listing.get("items", []) if e.get("reason") == reason]


class TestStaging:
    async def test_two_providers_are_sealed_minted_and_handed_off(self, stage: Stage) -> None:
        stage.providers.bound["ws-a"] = two_providers()
        created = await stage.workspace()
        report = await stage.run()
        assert report.error is None

        openai = await stage.envelope_secret("openai")
        assert openai is not None
        assert openai["metadata"]["labels"][LABEL_WORKSPACE_ID] == "ws-a"
        assert openai["metadata"]["labels"][LABEL_PROVIDER_SLUG] == "openai"
        assert "ownerReferences" not in openai["metadata"]
        models = secret_value(openai, "models")
        assert models is not None and json.loads(models) == ["gpt-4o", "gpt-4o-mini"]
        assert OPENAI_KEY.encode() not in models
        envelope = await stage.envelope("openai")
        assert envelope.startswith("stg:v1:hpke:hpke-g2:")
        assert OPENAI_KEY not in envelope
        assert stage.router.state.open(envelope) == OPENAI_KEY.encode()
        assert stage.router.state.open(await stage.envelope("local")) == COMPAT_KEY.encode()

        handoff = await stage.handoff()
        assert handoff["routerURL"] == stage.router.url
        assert re.fullmatch(r"r[0-9a-f]{12}", handoff["revision"])
        by_slug = {p["providerSlug"]: p for p in handoff["providers"]}
        first = by_slug["openai"]
        assert first["token"] == "lrt-fake-1"
        assert first["routerPath"] == "/w/ws-a/openai/v1"
        assert first["baseURL"] == "https://api.openai.com/v1"
        assert first["modelAllowlist"] == ["gpt-4o", "gpt-4o-mini"]
        assert first["keyID"] == "hpke-g2"
        assert first["expiresAt"] == "2026-11-29T13:00:00Z"
        datetime.fromisoformat(first["expiresAt"].replace("Z", "+00:00"))
        assert by_slug["local"]["baseURL"] == "https://llm.internal.example/v1"
        assert by_slug["local"]["kind"] == "openai_compatible"
        raw = await stage.handoff_raw()
        assert raw is not None and OPENAI_KEY.encode() not in raw

        handoff_secret = await stage.kube.get(SECRETS, handoff_name("ws-a"), stage.namespace)
        (owner,) = handoff_secret["metadata"]["ownerReferences"]
        assert owner["uid"] == created["metadata"]["uid"] and owner["kind"] == "Workspace"

        mint_secret = await stage.kube.get(SECRETS, MINT_KEY_SECRET, stage.relay_namespace)
        mint_key = secret_value(mint_secret, "mint-key")
        assert mint_key
        request = stage.router.state.calls("/internal/v1/tokens")[0]
        assert request.headers["Authorization"] == f"Bearer {mint_key.decode()}"
        assert request.body == {
            "workspaceID": "ws-a",
            "providerSlug": "openai",
            "baseURL": "https://api.openai.com/v1",
            "modelAllowlist": ["gpt-4o", "gpt-4o-mini"],
            "ttlSeconds": 3600,
            "keyID": "hpke-g2",
        }
        assert stage.providers.requests[0][:2] == ("ws-a", "user-1")

        ws = await stage.get()
        staged = condition(ws, "CredentialsStaged")
        assert staged is not None and staged["status"] == "True"
        assert staged["reason"] == "CredentialsStaged"
        assert staged["message"] == (
            f"2 provider(s) staged at revision {handoff['revision']} (keyID hpke-g2)"
        )
        assert condition(ws, "CredentialStale") is None
        assert annotations_on(ws)[SEALED_GENERATION] == "2"
        assert annotations_on(ws)[STAGED_REVISION] == handoff["revision"]

    async def test_an_envelope_does_not_open_under_a_tampered_header(self, stage: Stage) -> None:
        stage.providers.bound["ws-a"] = two_providers()
        await stage.workspace()
        await stage.run()
        envelope = await stage.envelope("openai")
        tampered = envelope.replace("stg:v1:hpke:hpke-g2:", "stg:v1:hpke:hpke-g9:", 1)
        with pytest.raises(EnvelopeError):
            open_envelope(stage.router.state.private_keys[2], tampered)

    async def test_kinds_the_router_cannot_front_are_skipped_and_named(self, stage: Stage) -> None:
        stage.providers.bound["ws-a"] = [
            provider("openai", "openai", OPENAI_KEY),
            provider("aws", "bedrock", "bedrock-secret-key"),
            provider("zen", "opencode", "zen-secret-key"),
        ]
        await stage.workspace()
        await stage.run()
        assert [p["providerSlug"] for p in (await stage.handoff())["providers"]] == ["openai"]
        assert await stage.envelope_secret("aws") is None
        assert await stage.envelope_secret("zen") is None
        staged = condition(await stage.get(), "CredentialsStaged")
        assert staged is not None
        assert "2 skipped (not relay-frontable)" in staged["message"]
        assert '"aws" (bedrock' in staged["message"] and '"zen" (opencode' in staged["message"]

    async def test_a_second_pass_with_nothing_changed_writes_nothing(
        self, stage: Stage, kube_server: KubeServer
    ) -> None:
        stage.providers.bound["ws-a"] = two_providers()
        await stage.workspace()
        await stage.run()
        envelope, handoff = await stage.envelope("openai"), await stage.handoff_raw()
        version = (await stage.get())["metadata"]["resourceVersion"]
        kube_server.writes.clear()

        report = await stage.run()

        assert kube_server.writes == []
        assert report.error is None
        assert await stage.envelope("openai") == envelope
        assert await stage.handoff_raw() == handoff
        assert stage.mints() == 2
        assert (await stage.get())["metadata"]["resourceVersion"] == version

    async def test_changed_models_reseal_the_envelope_with_the_new_list(self, stage: Stage) -> None:
        stage.providers.bound["ws-a"] = [provider("openai", "openai", OPENAI_KEY, models=("a",))]
        await stage.workspace()
        await stage.run()
        stage.providers.bound["ws-a"] = [provider("openai", "openai", OPENAI_KEY, models=("b",))]
        await stage.run()
        secret = await stage.envelope_secret("openai")
        assert secret is not None
        assert json.loads(secret_value(secret, "models") or b"") == ["b"]
        (entry,) = (await stage.handoff())["providers"]
        assert entry["modelAllowlist"] == ["b"]  # the old token's scope no longer fits

    async def test_a_new_key_under_the_same_slug_is_resealed(self, stage: Stage) -> None:
        stage.providers.bound["ws-a"] = [provider("openai", "openai", OPENAI_KEY)]
        await stage.workspace()
        await stage.run()
        old_group = set(stage.redactor.groups())
        stage.providers.bound["ws-a"] = [provider("openai", "openai", "sk-rotated-by-owner-42")]
        await stage.run()
        envelope = await stage.envelope("openai")
        assert stage.router.state.open(envelope) == b"sk-rotated-by-owner-42"
        assert stage.redactor.groups().isdisjoint(old_group)
        assert stage.redactor.redact(OPENAI_KEY) == OPENAI_KEY  # no longer ours to hide

    async def test_a_failed_envelope_write_leaves_no_redaction_group_behind(
        self, stage: Stage, kube_server: KubeServer
    ) -> None:
        """Each retry seals anew; a group per failed attempt would grow without bound."""
        stage.providers.bound["ws-a"] = [provider("openai", "openai", OPENAI_KEY)]
        await stage.workspace()
        await stage.run()
        groups = stage.redactor.groups()
        stage.providers.bound["ws-a"] = [provider("openai", "openai", "sk-rotated-by-owner-42")]
        path = f"/api/v1/namespaces/{stage.relay_namespace}/secrets/llm-relay-env-ws-a-openai"
        for _ in range(3):
            kube_server.fail_next(500, method="PUT", path=path)
            report = await stage.run()
            assert isinstance(report.error, TransientError)
            assert "relay staging write failed" in str(report.error)
        assert stage.redactor.groups() == groups

    async def test_a_workspace_without_an_owner_fails_staging_with_a_reason(
        self, stage: Stage
    ) -> None:
        await stage.workspace(owner="")
        await stage.run()
        staged = condition(await stage.get(), "CredentialsStaged")
        assert staged is not None and staged["status"] == "False"
        assert staged["reason"] == "StageFailed"
        assert "verified owner has no userID" in staged["message"]


class TestOwnerSpoof:
    """A tenant who writes a victim's userID into spec.owner must not have the victim's keys
    fetched: the lookup sends the owner admission verified, with the Workspace's uid and
    namespace, never spec.owner as it stands."""

    async def test_the_lookup_names_the_verified_owner_not_the_spec(
        self, stage: Stage, providers: Providers
    ) -> None:
        providers.bound_for[("ws-a", "victim")] = [provider("openai", "openai", OPENAI_KEY)]
        ws = await stage.workspace(owner="victim", verified="mallory")
        await stage.run()
        assert {owner for _, owner, _ in providers.requests} == {"mallory"}
        assert providers.identities == [(ws["metadata"]["uid"], stage.namespace)]
        assert await stage.envelope_secret("openai") is None

    async def test_a_workspace_without_a_record_fetches_nothing_until_confirmed(
        self, stage: Stage, providers: Providers
    ) -> None:
        providers.bound_for[("ws-a", "victim")] = [provider("openai", "openai", OPENAI_KEY)]
        await stage.workspace(owner="victim", verified=None)
        await stage.run()
        assert providers.requests == []
        staged = condition(await stage.get(), "CredentialsStaged")
        assert staged is not None and staged["status"] == "False"
        assert staged["reason"] == "OwnerUnverified"
        assert "kubectl annotate workspace" in staged["message"]
        assert await stage.envelope_secret("openai") is None


class TestRevocation:
    async def test_an_unbound_provider_loses_its_envelope_and_handoff_entry(
        self, stage: Stage
    ) -> None:
        stage.providers.bound["ws-a"] = two_providers()
        await stage.workspace()
        await stage.run()
        groups = stage.redactor.groups()
        stage.providers.bound["ws-a"] = two_providers()[:1]

        report = await stage.run()

        assert report.error is None
        assert await stage.envelope_secret("local") is None
        assert [p["providerSlug"] for p in (await stage.handoff())["providers"]] == ["openai"]
        assert len(stage.redactor.groups()) == len(groups) - 1
        assert stage.redactor.redact(COMPAT_KEY) == COMPAT_KEY
        ws = await stage.get()
        stale = condition(ws, "CredentialStale")
        assert stale is not None and (stale["status"], stale["reason"]) == ("True", "StaleRevoked")
        assert "envelope deleted" in stale["message"]
        assert "local" not in json.loads(annotations_on(ws)[STAGED_PROVIDERS])
        (event,) = await events(stage, "CredentialRevoked")
        assert event["type"] == "Normal"

        await stage.run()
        assert condition(await stage.get(), "CredentialStale") is None

    async def test_a_failed_delete_keeps_the_envelope_retained_and_retries(
        self, stage: Stage, kube_server: KubeServer
    ) -> None:
        stage.providers.bound["ws-a"] = two_providers()
        await stage.workspace()
        await stage.run()
        stage.providers.bound["ws-a"] = two_providers()[:1]
        kube_server.fail_next(
            500,
            method="DELETE",
            path=f"/api/v1/namespaces/{stage.relay_namespace}/secrets",
            selecting=f"{LABEL_PROVIDER_SLUG}=local",
        )

        report = await stage.run()

        assert isinstance(report.error, TransientError)
        assert "revocation incomplete" in str(report.error)
        assert await stage.envelope_secret("local") is not None
        ws = await stage.get()
        stale = condition(ws, "CredentialStale")
        assert stale is not None and stale["reason"] == "StaleRevoked"
        assert "INCOMPLETE" in stale["message"] and "RETAINED" in stale["message"]
        assert "envelope deleted" not in stale["message"]
        assert "local" in json.loads(annotations_on(ws)[STAGED_PROVIDERS])

        assert (await stage.run()).error is None
        assert await stage.envelope_secret("local") is None
        assert "local" not in json.loads(annotations_on(await stage.get())[STAGED_PROVIDERS])

    async def test_a_deletion_that_succeeded_is_announced_even_when_another_failed(
        self, stage: Stage, kube_server: KubeServer
    ) -> None:
        stage.providers.bound["ws-a"] = two_providers()
        await stage.workspace()
        await stage.run()
        stage.providers.bound["ws-a"] = []
        kube_server.fail_next(
            500,
            method="DELETE",
            path=f"/api/v1/namespaces/{stage.relay_namespace}/secrets",
            selecting=f"{LABEL_PROVIDER_SLUG}=local",
        )

        report = await stage.run()

        assert isinstance(report.error, TransientError)
        assert await stage.envelope_secret("openai") is None
        (event,) = await events(stage, "CredentialRevoked")
        assert "openai" in event["message"] and "local" not in event["message"]

    async def test_cleanup_deletes_every_envelope_and_forgets_the_keys(self, stage: Stage) -> None:
        stage.providers.bound["ws-a"] = two_providers()
        await stage.workspace()
        await stage.run()
        await stage.staging.cleanup(await stage.get())
        assert await stage.envelope_secret("openai") is None
        assert await stage.envelope_secret("local") is None
        assert stage.redactor.groups() == frozenset()

    async def test_a_failed_cleanup_delete_is_reported_orphaned_and_not_raised(
        self, stage: Stage, kube_server: KubeServer
    ) -> None:
        stage.providers.bound["ws-a"] = two_providers()[:1]
        await stage.workspace()
        await stage.run()
        kube_server.fail_next(
            500, method="DELETE", path=f"/api/v1/namespaces/{stage.relay_namespace}"
        )
        await stage.staging.cleanup(await stage.get())
        (event,) = await events(stage, "RelayEnvelopeOrphaned")
        uid = (await stage.get())["metadata"]["uid"]
        assert event["type"] == "Warning" and f"{LABEL_WORKSPACE_UID}={uid}" in event["message"]


class TestKeysAndTokens:
    async def test_a_new_router_generation_reseals_and_remints_everything(
        self, stage: Stage
    ) -> None:
        stage.providers.bound["ws-a"] = two_providers()[:1]
        await stage.workspace()
        await stage.run()
        old = await stage.envelope("openai")
        await stage.rotate_router()

        await stage.run()

        envelope = await stage.envelope("openai")
        assert envelope.startswith("stg:v1:hpke:hpke-g3:")
        assert open_envelope(stage.router.state.private_keys[3], envelope) == OPENAI_KEY.encode()
        with pytest.raises(EnvelopeError):
            open_envelope(stage.router.state.private_keys[3], old)
        (entry,) = (await stage.handoff())["providers"]
        assert entry["keyID"] == "hpke-g3" and stage.mints() == 2
        assert annotations_on(await stage.get())[SEALED_GENERATION] == "3"
        assert len(stage.redactor.groups()) == 1

    async def test_tokens_are_reused_until_half_their_lifetime(self, stage: Stage) -> None:
        stage.providers.bound["ws-a"] = two_providers()[:1]
        await stage.workspace()
        await stage.run()
        assert stage.mints() == 1
        stage.clock.advance(timedelta(minutes=20))
        await stage.run()
        assert stage.mints() == 1
        stage.clock.advance(timedelta(minutes=20))
        await stage.run()
        assert stage.mints() == 2
        (entry,) = (await stage.handoff())["providers"]
        assert entry["token"] == "lrt-fake-2" and entry["expiresAt"] == "2026-11-29T13:40:00Z"

    async def test_a_failed_mint_keeps_a_valid_token_and_drops_an_expired_one(
        self, stage: Stage
    ) -> None:
        stage.providers.bound["ws-a"] = two_providers()[:1]
        await stage.workspace()
        await stage.run()
        stage.router.state.mint_status = 503
        stage.clock.advance(timedelta(minutes=40))

        await stage.run()
        (entry,) = (await stage.handoff())["providers"]
        assert entry["token"] == "lrt-fake-1"
        assert condition(await stage.get(), "CredentialStale") is None

        stage.clock.advance(timedelta(hours=2))
        await stage.run()
        assert (await stage.handoff())["providers"] == []
        ws = await stage.get()
        stale = condition(ws, "CredentialStale")
        assert stale is not None and stale["reason"] == "StageFailed"
        assert stale["message"] == "token mint failed; staged tokens incomplete"
        staged = condition(ws, "CredentialsStaged")
        assert staged is not None and "1 token mint(s) failed" in staged["message"]

    async def test_a_failed_mint_never_keeps_a_token_scoped_to_a_former_upstream(
        self, stage: Stage
    ) -> None:
        """The owner moved the provider to another upstream: the old token would send the
        freshly sealed key where the owner no longer wants it."""
        stage.providers.bound["ws-a"] = two_providers()[1:]
        await stage.workspace()
        await stage.run()
        stage.router.state.mint_status = 503
        stage.providers.bound["ws-a"] = [
            provider("local", "openai_compatible", COMPAT_KEY, base_url="https://moved.example/v1")
        ]

        await stage.run()

        assert (await stage.handoff())["providers"] == []
        stale = condition(await stage.get(), "CredentialStale")
        assert stale is not None and stale["reason"] == "StageFailed"

    async def test_a_wiped_bookkeeping_record_restages_once_then_goes_quiet(
        self, stage: Stage, kube_server: KubeServer
    ) -> None:
        stage.providers.bound["ws-a"] = two_providers()
        await stage.workspace()
        await stage.run()
        await stage.kube.patch(
            WORKSPACES,
            "ws-a",
            {"status": {STATUS_FIELD: {STAGED_PROVIDERS: None}}},
            stage.namespace,
            sub="status",
        )
        await stage.run()
        assert STAGED_PROVIDERS in annotations_on(await stage.get())
        mints = stage.mints()
        version = (await stage.get())["metadata"]["resourceVersion"]
        kube_server.writes.clear()
        await stage.run()
        assert stage.mints() == mints
        assert kube_server.writes == []
        assert (await stage.get())["metadata"]["resourceVersion"] == version


class TestEarlyExits:
    async def test_a_shape_invalid_public_key_stages_nothing(self, stage: Stage) -> None:
        stage.providers.bound["ws-a"] = two_providers()
        pub = await stage.kube.get(SECRETS, HPKE_PUB_SECRET, stage.relay_namespace)
        pub["data"] = {"payload": base64.b64encode(b"not-json").decode()}
        await stage.kube.replace(SECRETS, pub)
        await stage.workspace()
        await stage.run()
        assert await stage.envelope_secret("openai") is None
        staged = condition(await stage.get(), "CredentialsStaged")
        assert staged is not None and staged["status"] == "False"
        assert staged["reason"] == "StalePubUnreadable"
        assert HPKE_PUB_SECRET in staged["message"] and "shape-invalid" in staged["message"]

    async def test_a_public_key_that_is_not_x25519_fails_at_sealer_construction(
        self, stage: Stage
    ) -> None:
        stage.providers.bound["ws-a"] = two_providers()
        await stage.publish_pub(b"dummy-not-a-curve-point", 2)
        await stage.workspace()
        await stage.run()
        staged = condition(await stage.get(), "CredentialsStaged")
        assert staged is not None and staged["reason"] == "StageFailed"
        assert staged["message"].startswith("sealer construction failed:")

    async def test_a_down_credential_source_fails_staging_but_leaves_stale_alone(
        self, stage: Stage
    ) -> None:
        stage.providers.bound["ws-a"] = two_providers()
        await stage.workspace(secretsDelivery={"degradedReason": "token_expired"})
        await stage.run()
        stage.providers.status = 500
        report = await stage.run()
        assert report.error is None  # business failure: the reconcile goes on
        ws = await stage.get()
        staged = condition(ws, "CredentialsStaged")
        assert staged is not None and staged["reason"] == "StageFailed"
        assert staged["message"] == "credential source unavailable: api returned status 500"
        stale = condition(ws, "CredentialStale")
        assert stale is not None and stale["reason"] == "StaleTokenExpired"

    async def test_relay_namespace_reads_are_name_scoped_gets_of_two_secrets(
        self, stage: Stage
    ) -> None:
        """The chart grants get on the public key and the mint key only: never an envelope."""
        seen: list[str] = []
        relay = stage.staging.relay
        original = relay.get

        async def recording_get(name: str) -> dict[str, object] | None:
            seen.append(name)
            return await original(name)

        relay.get = recording_get  # type: ignore[method-assign]
        stage.providers.bound["ws-a"] = two_providers()
        await stage.workspace()
        await stage.run()
        await stage.run()
        assert set(seen) == {HPKE_PUB_SECRET, MINT_KEY_SECRET}
        assert (await stage.handoff())["providers"]
