"""No staged key in any form leaves the controller (log lines, Events, condition messages),
and parallel passes over many workspaces keep to their own workspace."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Iterator
from datetime import timedelta

import pytest

from controller.staging.desired import STAGED_REVISION, recorded
from tests.controller.staging.conftest import (
    COMPAT_KEY,
    OPENAI_KEY,
    Stage,
    condition,
    provider,
    two_providers,
)
from tests.kubeapi import KubeServer
from wspin.core.kinds import EVENTS, WORKSPACES
from wspin.core.logs import JSONFormatter, add_scrubber, remove_scrubber
from wspin.core.redact import REPLACEMENT


def every_form(key: str) -> list[str]:
    raw = key.encode()
    return [
        key,
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(raw).decode(),
        base64.b64encode(raw).decode().rstrip("="),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
        json.dumps(key)[1:-1],
    ]


class Lines(logging.Handler):
    """Every record rendered by the production formatter (scrubbers included)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JSONFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def captured(stage: Stage) -> Iterator[Lines]:
    handler = Lines()
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    add_scrubber(stage.redactor.redact)
    try:
        yield handler
    finally:
        remove_scrubber(stage.redactor.redact)
        root.removeHandler(handler)
        root.setLevel(previous)


async def test_no_key_in_any_form_reaches_a_log_line_event_or_condition(
    stage: Stage, captured: Lines, kube_server: KubeServer
) -> None:
    keys = [OPENAI_KEY, COMPAT_KEY]
    stage.providers.bound["ws-a"] = two_providers()
    await stage.workspace()
    await stage.run()
    revision = recorded(await stage.get())[STAGED_REVISION]
    # A pod reporting corruption, a router that echoes the key in its rejections, a failing
    # revocation delete, then cleanup with a failing delete: every error path talks.
    await stage.set_status(
        secretsDelivery={"relayRevision": revision, "degradedReason": "credential_stale"}
    )
    stage.router.state.mint_status = 400
    stage.router.state.mint_detail = f"bad key {OPENAI_KEY} / {COMPAT_KEY}"
    stage.router.state.rotate_status = 500
    stage.router.state.rotate_detail = f"cannot rotate for {OPENAI_KEY}"
    stage.clock.advance(timedelta(hours=2))
    await stage.run()
    stage.providers.bound["ws-a"] = two_providers()[:1]
    kube_server.fail_next(500, method="DELETE", path=f"/api/v1/namespaces/{stage.relay_namespace}")
    await stage.run()
    logging.getLogger("controller.staging").error("echo %s", OPENAI_KEY)  # a careless line
    kube_server.fail_next(500, method="DELETE", path=f"/api/v1/namespaces/{stage.relay_namespace}")
    await stage.staging.cleanup(await stage.get())

    listing = await stage.kube.list(EVENTS, stage.namespace)
    event_messages = [str(e.get("message")) for e in listing["items"]]
    ws = await stage.get()
    condition_messages = [str(c.get("message")) for c in ws["status"]["conditions"]]
    reasons = {str(e.get("reason")) for e in listing["items"]}
    assert {"RelayRotateEscalationFailed", "RelayEnvelopeOrphaned"} <= reasons
    assert any("token mint failed" in line for line in captured.lines)
    assert any(REPLACEMENT in line for line in captured.lines)  # the echoes were there
    assert any(REPLACEMENT in message for message in event_messages)
    for text in [*captured.lines, *event_messages, *condition_messages]:
        for key in keys:
            for form in every_form(key):
                assert form not in text, f"a form of a staged key leaked: {text[:200]}"


async def test_four_parallel_passes_over_fifty_workspaces_keep_to_their_own(
    stage: Stage,
) -> None:
    names = [f"ws-{i:02d}" for i in range(50)]
    keys = {name: f"sk-{name}-unique-secret" for name in names}
    for name in names:
        stage.providers.bound[name] = [
            provider("openai", "openai", keys[name], models=(f"model-{name}",)),
            provider("mistral", "mistral", f"mistral-{keys[name]}"),
        ]
        await stage.workspace(name)
    stage.providers.delay = 0.002
    gate = asyncio.Semaphore(4)
    shared = dict(vars(stage.staging))

    async def reconcile(name: str) -> None:
        async with gate:
            report = await stage.run(name)
            assert report.error is None

    await asyncio.gather(*(reconcile(name) for name in names))
    # Half of them lose a provider, again in parallel.
    for name in names[::2]:
        stage.providers.bound[name] = stage.providers.bound[name][:1]
    await asyncio.gather(*(reconcile(name) for name in names))

    tokens: set[str] = set()
    for index, name in enumerate(names):
        envelope = await stage.envelope("openai", name)
        assert stage.router.state.open(envelope) == keys[name].encode()
        handoff = await stage.handoff(name)
        slugs = [p["providerSlug"] for p in handoff["providers"]]
        assert slugs == (["openai"] if index % 2 == 0 else ["openai", "mistral"])
        for entry in handoff["providers"]:
            assert entry["routerPath"] == f"/w/{name}/{entry['providerSlug']}/v1"
            tokens.add(entry["token"])
        (openai,) = [p for p in handoff["providers"] if p["providerSlug"] == "openai"]
        assert openai["modelAllowlist"] == [f"model-{name}"]
        ws = await stage.kube.get(WORKSPACES, name, stage.namespace)
        staged = condition(ws, "CredentialsStaged")
        assert staged is not None and handoff["revision"] in staged["message"]
        stale = condition(ws, "CredentialStale")
        assert (stale is not None) == (index % 2 == 0)
        mistral = await stage.envelope_secret("mistral", name)
        assert (mistral is None) == (index % 2 == 0)
    assert len(tokens) == 75  # every token minted for exactly one workspace and provider
    assert {k: id(v) for k, v in vars(stage.staging).items()} == {
        k: id(v) for k, v in shared.items()
    }  # the pass object gained no per-pass state
