"""What the running pod applied (``status.secretsDelivery``, as the Workspace controller's
agent scheduler mirrors agentd's health report) drives each staleness class end to end into
``CredentialStale``, ``CredentialRejected`` and the rotate escalation; the pass decides on the
Workspace it is given, so a report the reconciler has not written yet counts already."""

from __future__ import annotations

import pytest

from controller.staging.desired import STAGED_REVISION, recorded
from tests.controller.staging.conftest import Stage, condition, two_providers
from tests.controller.staging.support import events, publish_on_rotate


async def staged_revision(stage: Stage, name: str = "ws-a") -> str:
    return str(recorded(await stage.get(name))[STAGED_REVISION])


async def workspace(stage: Stage, name: str = "ws-a") -> None:
    stage.providers.bound[name] = two_providers()
    await stage.workspace(name)


async def report(stage: Stage, relay_revision: str, degraded: str, name: str = "ws-a") -> None:
    """agentd's report as the Workspace status carries it once mirrored."""
    await stage.set_status(
        name, secretsDelivery={"relayRevision": relay_revision, "degradedReason": degraded}
    )


async def test_the_pass_reads_the_report_from_the_workspace_it_is_given(stage: Stage) -> None:
    await workspace(stage)
    await stage.run()
    ws = await stage.get()
    fresh = {
        **ws,
        "status": {
            **(ws.get("status") or {}),
            "secretsDelivery": {
                "relayRevision": await staged_revision(stage),
                "degradedReason": "token_expired",
            },
        },
    }
    report_ = await stage.staging.run(fresh)
    stale = next(c for c in report_.conditions if c["type"] == "CredentialStale")
    assert stale["reason"] == "StaleTokenExpired"


# -- each staleness class, end to end ----------------------------------------------------


@pytest.mark.parametrize(
    ("code", "stale_reason", "rejected"),
    [
        ("token_expired", "StaleTokenExpired", False),
        ("relay_unreachable", "StaleDeliveryDeferred", False),
        ("spawn_env_pending", "StaleDeliveryDeferred", False),
        ("scope_violation", "StaleDeliveryDeferred", True),
        ("", None, False),
    ],
)
async def test_each_reported_code_becomes_its_condition_without_a_rotation(
    stage: Stage, code: str, stale_reason: str | None, rejected: bool
) -> None:
    await publish_on_rotate(stage)
    await workspace(stage)
    await stage.run()
    await report(stage, await staged_revision(stage), code)

    await stage.run()

    ws = await stage.get()
    stale = condition(ws, "CredentialStale")
    assert (stale["reason"] if stale else None) == stale_reason
    refused = condition(ws, "CredentialRejected")
    assert (refused is not None) == rejected
    if rejected:
        assert refused is not None and refused["reason"] == "CredentialRouterRejected"
        assert len(await events(stage, "CredentialRouterRejected")) == 1
    assert stage.rotations() == 0


async def test_corruption_with_the_staged_revision_applied_escalates_a_rotation(
    stage: Stage,
) -> None:
    await publish_on_rotate(stage)
    await workspace(stage)
    await stage.run()
    await report(stage, await staged_revision(stage), "credential_stale")

    await stage.run()

    assert stage.rotations() == 1
    envelope = await stage.envelope("openai")
    assert envelope.startswith("stg:v1:hpke:hpke-g3:")
    assert stage.router.state.open(envelope)
    (event,) = await events(stage, "RelayRotateEscalated")
    assert "generation 3" in event["message"]


async def test_corruption_reported_for_an_older_revision_does_not_rotate(
    stage: Stage,
) -> None:
    await publish_on_rotate(stage)
    await workspace(stage)
    await stage.run()
    await report(stage, "r000000000000", "credential_stale")

    await stage.run()

    stale = condition(await stage.get(), "CredentialStale")
    assert stale is not None and stale["reason"] == "StaleWrongPubLineage"
    assert stage.rotations() == 0
