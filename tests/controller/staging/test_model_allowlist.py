"""A provider without a model list is never minted: the router reads an empty allowlist as
"every model", so a token for it would let the workspace call any model the key reaches.

The pass refuses it (no envelope, no token, no handoff entry), stages the rest, and reports
``CredentialsStaged=False/ModelListMissing`` naming the provider and what to set. The fake
router records every mint call, so "no token minted" is counted, not inferred.
"""

from __future__ import annotations

from tests.controller.staging.conftest import (
    COMPAT_KEY,
    OPENAI_KEY,
    Stage,
    condition,
    provider,
)

UNSCOPED = provider("open", "openai", OPENAI_KEY, models=())
SCOPED = provider(
    "local", "openai_compatible", COMPAT_KEY, base_url="https://llm.example/v1", models=("qwen",)
)


async def test_a_provider_without_a_model_list_is_never_minted(stage: Stage) -> None:
    stage.providers.bound["ws-a"] = [UNSCOPED]
    await stage.workspace()

    report = await stage.run()

    assert report.error is None
    assert stage.mints() == 0 and stage.router.state.minted == 0
    assert await stage.envelope_secret("open") is None
    assert (await stage.handoff())["providers"] == []
    staged = condition(await stage.get(), "CredentialsStaged")
    assert staged is not None
    assert (staged["status"], staged["reason"]) == ("False", "ModelListMissing")
    assert '"open" (openai: no model list)' in staged["message"]
    assert "models[].id" in staged["message"]
    assert OPENAI_KEY not in staged["message"]


async def test_the_other_providers_are_still_staged_and_the_condition_says_both(
    stage: Stage,
) -> None:
    stage.providers.bound["ws-a"] = [UNSCOPED, SCOPED]
    await stage.workspace()

    await stage.run()

    [mint] = stage.router.state.calls("/internal/v1/tokens")
    assert mint.body["providerSlug"] == "local" and mint.body["modelAllowlist"] == ["qwen"]
    handoff = await stage.handoff()
    assert [p["providerSlug"] for p in handoff["providers"]] == ["local"]
    assert await stage.envelope_secret("local") is not None
    assert await stage.envelope_secret("open") is None
    staged = condition(await stage.get(), "CredentialsStaged")
    assert staged is not None and staged["status"] == "False"
    assert "1 provider(s) staged at revision" in staged["message"]
    assert '"open"' in staged["message"]


async def test_a_model_list_emptied_later_revokes_what_was_staged(stage: Stage) -> None:
    stage.providers.bound["ws-a"] = [provider("open", "openai", OPENAI_KEY, models=("gpt-4o",))]
    await stage.workspace()
    await stage.run()
    assert await stage.envelope_secret("open") is not None and stage.mints() == 1

    stage.providers.bound["ws-a"] = [UNSCOPED]
    await stage.run()

    assert stage.mints() == 1
    assert await stage.envelope_secret("open") is None
    assert (await stage.handoff())["providers"] == []
    ws = await stage.get()
    staged = condition(ws, "CredentialsStaged")
    assert staged is not None and staged["reason"] == "ModelListMissing"
    stale = condition(ws, "CredentialStale")
    assert stale is not None and stale["reason"] == "StaleRevoked"


async def test_a_model_list_added_later_stages_the_provider(stage: Stage) -> None:
    stage.providers.bound["ws-a"] = [UNSCOPED]
    await stage.workspace()
    await stage.run()

    stage.providers.bound["ws-a"] = [provider("open", "openai", OPENAI_KEY, models=("gpt-4o",))]
    await stage.run()

    assert stage.mints() == 1
    assert [p["providerSlug"] for p in (await stage.handoff())["providers"]] == ["open"]
    staged = condition(await stage.get(), "CredentialsStaged")
    assert staged is not None and staged["status"] == "True"
