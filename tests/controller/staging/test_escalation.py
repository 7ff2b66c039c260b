"""Disaster recovery and the pod-reported conditions: rotate escalation with its cluster-wide
10-minute budget, torn rotations, and the staleness and rejection classes."""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

import pytest

from controller.staging.desired import (
    SEALED_GENERATION,
    STAGED_REVISION,
    DesiredProvider,
    ProviderCredential,
    Staged,
    recorded,
)
from controller.staging.escalation import ESCALATION_ANNOTATION, lineage_intact
from controller.staging.secrets import MINT_KEY_SECRET
from tests.controller.staging.conftest import Stage, condition, two_providers
from tests.controller.staging.support import events, publish_on_rotate
from wspin.core.clock import format_time, parse_time
from wspin.core.kinds import SECRETS


async def staged_workspace(stage: Stage, name: str = "ws-a", **delivery: str) -> str:
    """A workspace staged at gen 2 whose pod reports ``delivery`` (revision filled in)."""
    stage.providers.bound[name] = two_providers()
    await stage.workspace(name)
    await stage.run(name)
    revision = recorded(await stage.get(name))[STAGED_REVISION]
    await stage.set_status(name, secretsDelivery={"relayRevision": revision, **delivery})
    return str(revision)


async def test_corruption_with_intact_lineage_rotates_once_and_reseals(stage: Stage) -> None:
    await publish_on_rotate(stage)
    await staged_workspace(stage, degradedReason="credential_stale")

    await stage.run()

    assert stage.rotations() == 1
    envelope = await stage.envelope("openai")
    assert envelope.startswith("stg:v1:hpke:hpke-g3:")
    assert stage.router.state.open(envelope)
    ws = await stage.get()
    assert recorded(ws)[SEALED_GENERATION] == "3"
    mint = await stage.kube.get(SECRETS, MINT_KEY_SECRET, stage.relay_namespace)
    stamp = parse_time(mint["metadata"]["annotations"][ESCALATION_ANNOTATION])
    assert stamp == stage.clock()
    (event,) = await events(stage, "RelayRotateEscalated")
    assert "generation 3" in event["message"]


async def test_a_second_workspace_within_ten_minutes_does_not_rotate_again(
    stage: Stage,
) -> None:
    await publish_on_rotate(stage)
    await staged_workspace(stage, "ws-a", degradedReason="credential_stale")
    await stage.run("ws-a")
    await staged_workspace(stage, "ws-b", degradedReason="credential_stale")
    stage.clock.advance(timedelta(minutes=9))
    await stage.run("ws-b")
    assert stage.rotations() == 1


async def test_the_budget_returns_after_ten_minutes(stage: Stage) -> None:
    await publish_on_rotate(stage)
    mint = await stage.kube.get_or_none(SECRETS, MINT_KEY_SECRET, stage.relay_namespace)
    assert mint is None
    await staged_workspace(stage, degradedReason="credential_stale")
    mint = await stage.kube.get(SECRETS, MINT_KEY_SECRET, stage.relay_namespace)
    stale_stamp = format_time(stage.clock() - timedelta(minutes=11))
    mint["metadata"].setdefault("annotations", {})[ESCALATION_ANNOTATION] = stale_stamp
    await stage.kube.replace(SECRETS, mint)
    await stage.run()
    assert stage.rotations() == 1


async def test_a_receipt_the_published_key_does_not_match_is_refused(stage: Stage) -> None:
    await staged_workspace(stage, degradedReason="credential_stale")  # no publish on rotate
    before = await stage.envelope("openai")

    await stage.run()

    assert stage.rotations() == 1
    assert await stage.envelope("openai") == before
    ws = await stage.get()
    stale = condition(ws, "CredentialStale")
    assert stale is not None and stale["reason"] == "StaleWrongPubLineage"
    staged = condition(ws, "CredentialsStaged")
    assert staged is not None and staged["status"] == "False"  # not overwritten by the pass end
    assert recorded(ws)[SEALED_GENERATION] == "2"


async def test_a_failed_rotate_spends_the_budget_and_warns(stage: Stage) -> None:
    stage.router.state.rotate_status = 503
    await staged_workspace(stage, degradedReason="credential_stale")
    await stage.run()
    (event,) = await events(stage, "RelayRotateEscalationFailed")
    assert event["type"] == "Warning" and "10-minute" in event["message"]
    stage.router.state.rotate_status = 200
    await stage.run()
    assert stage.rotations() == 1


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("token_expired", "StaleTokenExpired"),
        ("relay_unreachable", "StaleDeliveryDeferred"),
        ("spawn_env_pending", "StaleDeliveryDeferred"),
        ("", None),
    ],
)
async def test_other_degrade_codes_never_rotate(
    stage: Stage, code: str, reason: str | None
) -> None:
    await staged_workspace(stage, degradedReason=code)
    await stage.run()
    assert stage.rotations() == 0
    stale = condition(await stage.get(), "CredentialStale")
    assert (stale["reason"] if stale else None) == reason


async def test_corruption_with_broken_lineage_does_not_rotate(stage: Stage) -> None:
    await staged_workspace(stage, degradedReason="credential_stale")
    await stage.set_status(
        secretsDelivery={"relayRevision": "r000000000000", "degradedReason": "credential_stale"}
    )
    await stage.run()
    assert stage.rotations() == 0
    stale = condition(await stage.get(), "CredentialStale")
    assert stale is not None and stale["reason"] == "StaleWrongPubLineage"


async def test_a_revocation_with_corruption_revokes_and_does_not_rotate(stage: Stage) -> None:
    await staged_workspace(stage, degradedReason="credential_stale")
    stage.providers.bound["ws-a"] = two_providers()[:1]
    await stage.run()
    assert stage.rotations() == 0
    stale = condition(await stage.get(), "CredentialStale")
    assert stale is not None and stale["reason"] == "StaleRevoked"


async def test_a_router_rejection_sets_rejected_warns_once_and_defers_delivery(
    stage: Stage,
) -> None:
    await staged_workspace(stage, degradedReason="scope_violation")
    await stage.run()
    await stage.run()
    ws = await stage.get()
    rejected = condition(ws, "CredentialRejected")
    assert rejected is not None and rejected["status"] == "True"
    assert "RouterRejected" in rejected["reason"]
    assert rejected["message"] == "router rejected a token: scope_violation"
    stale = condition(ws, "CredentialStale")
    assert stale is not None and stale["reason"] == "StaleDeliveryDeferred"
    (event,) = await events(stage, "CredentialRouterRejected")
    assert event["type"] == "Warning"
    assert stage.rotations() == 0


async def test_a_message_only_change_of_the_degrade_code_is_persisted_in_that_pass(
    stage: Stage,
) -> None:
    revision = await staged_workspace(stage, degradedReason="relay_unreachable")
    await stage.run()
    await stage.set_status(
        secretsDelivery={"relayRevision": revision, "degradedReason": "spawn_env_pending"}
    )
    await stage.run()
    stale = condition(await stage.get(), "CredentialStale")
    assert stale is not None and stale["message"] == (
        "staged material not applied by the running pod: spawn_env_pending "
        "(a wait or fault rotation cannot repair)"
    )


class TestLineage:
    BOOK: ClassVar = {"openai": Staged("k", "hpke-g2", "m", "staged:x")}
    WANT: ClassVar = [
        DesiredProvider(ProviderCredential("openai", "openai", "k"), "https://api.openai.com/v1")
    ]

    def test_lineage_holds_when_the_pod_applied_the_staged_revision_under_this_key(
        self,
    ) -> None:
        assert lineage_intact(self.WANT, self.BOOK, "hpke-g2", "rabc", "rabc")

    @pytest.mark.parametrize(
        ("key_id", "staged", "applied"),
        [
            ("hpke-g2", "rabc", "rold"),  # the pod runs an older revision
            ("hpke-g2", "rabc", ""),  # only spawnedRev reported: no relayRevision
            ("hpke-g2", "", ""),  # nothing staged yet
            ("hpke-g3", "rabc", "rabc"),  # sealed under another keyID
        ],
    )
    def test_lineage_is_broken_otherwise(self, key_id: str, staged: str, applied: str) -> None:
        assert not lineage_intact(self.WANT, self.BOOK, key_id, staged, applied)
