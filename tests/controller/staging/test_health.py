"""agentd's health report, read over real HTTP from a fake agentd on loopback (the pod's IP
is 127.0.0.1), mirrored into ``status.secretsDelivery`` and driving each staleness class end
to end into ``CredentialStale``, ``CredentialRejected`` and the rotate escalation; pods that
do not answer are counted, not blamed; only pods with the delivery marker are asked."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from controller.staging.desired import STAGED_REVISION
from controller.staging.health import (
    FIELD_MAX,
    DeliveryHealth,
    HealthScraper,
    parse_health,
    scrape_target,
)
from controller.staging.staging_pass import RelayStagingPass
from controller.types import ObjectKey
from tests import stub_http as serving
from tests.controller.staging.conftest import Stage, condition, two_providers
from tests.controller.staging.support import events, publish_on_rotate
from tests.support.waiting import eventually
from wspin.core.contract import AGENTD, LABEL_APP, LABEL_APP_VALUE, MAIN_CONTAINER
from wspin.core.kinds import PODS
from wspin.kube.client import Kube
from wspin.kube.informer import Informer

Obj = dict[str, Any]


@dataclass
class FakeAgentd:
    """agentd's health endpoint: answers ``report`` with ``status``; counts what it served."""

    port: int = 0
    status: int = 200
    report: Obj = field(default_factory=dict)
    raw: bytes | None = None
    requests: int = 0
    gate: asyncio.Event | None = None
    """Set: every answer waits for it, so a test sees how many requests are open at once."""
    in_flight: int = 0
    most_in_flight: int = 0


@pytest.fixture
async def agentd() -> AsyncIterator[FakeAgentd]:
    fake = FakeAgentd()

    async def healthz(request: web.Request) -> web.Response:
        fake.requests += 1
        fake.in_flight += 1
        fake.most_in_flight = max(fake.most_in_flight, fake.in_flight)
        try:
            if fake.gate is not None:
                await fake.gate.wait()
            body = fake.raw if fake.raw is not None else json.dumps(fake.report).encode()
            return web.Response(body=body, status=fake.status, content_type="application/json")
        finally:
            fake.in_flight -= 1

    app = web.Application()
    app.router.add_get("/v1/healthz", healthz)
    runner, fake.port = await serving.start(app, "127.0.0.1", 0)
    try:
        yield fake
    finally:
        await runner.cleanup()


@dataclass
class Scraped:
    stage: Stage
    agentd: FakeAgentd
    pods: Informer
    registry: CollectorRegistry

    async def workspace(self, name: str = "ws-a", *, marker: bool = True) -> None:
        """A Workspace whose pod runs at 127.0.0.1 (held unscheduled, so no kubelet rewrites
        its status on a real cluster) and carries the agentd delivery marker or not."""
        self.stage.providers.bound[name] = two_providers()
        await self.stage.workspace(name)
        env = [{"name": AGENTD.marker_env, "value": "1"}] if marker else []
        pod_name = f"{name}-pod"
        await self.stage.kube.create(
            PODS,
            {
                "metadata": {
                    "name": pod_name,
                    "namespace": self.stage.namespace,
                    "labels": {LABEL_APP: LABEL_APP_VALUE},
                },
                "spec": {
                    "schedulingGates": [{"name": "wspin.test/never-schedule"}],
                    "containers": [
                        {"name": MAIN_CONTAINER, "image": "registry.invalid/ws:1", "env": env}
                    ],
                },
            },
        )
        pod = await self.stage.kube.patch(
            PODS,
            pod_name,
            {
                "status": {
                    "phase": "Running",
                    "podIP": "127.0.0.1",
                    "podIPs": [{"ip": "127.0.0.1"}],
                }
            },
            self.stage.namespace,
            sub="status",
        )
        version = int(pod["metadata"]["resourceVersion"])

        def seen() -> bool:
            cached = self.pods.get(ObjectKey(self.stage.namespace, pod_name))
            return cached is not None and int(cached["metadata"]["resourceVersion"]) >= version

        await eventually(seen, f"the pod cache to see {pod_name}")
        await self.stage.set_status(name, podName=pod_name)

    def scrapes(self, outcome: str) -> float:
        value = self.registry.get_sample_value(
            "wspin_staging_health_scrapes_total", {"outcome": outcome}
        )
        return value or 0.0


@pytest.fixture
async def scraped(stage: Stage, agentd: FakeAgentd, kube: Kube) -> AsyncIterator[Scraped]:
    pods = Informer(kube, PODS, namespace=stage.namespace)
    task = asyncio.create_task(pods.run())
    await asyncio.wait_for(pods.wait_synced(), 10)
    registry = CollectorRegistry()
    staging = RelayStagingPass(
        stage.config,
        kube,
        redactor=stage.redactor,
        relay=stage.staging.relay,
        source=stage.staging.source,
        clock=stage.clock,
        pods=pods,
        health=HealthScraper(registry, port=agentd.port, concurrency=2),
    )
    try:
        yield Scraped(replace(stage, staging=staging), agentd, pods, registry)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await staging.router.session.close()
        if staging.health is not None:
            await staging.health.close()


async def staged_revision(stage: Stage, name: str = "ws-a") -> str:
    return str((await stage.get(name))["metadata"]["annotations"][STAGED_REVISION])


def delivery(ws: Obj) -> Obj:
    return dict((ws.get("status") or {}).get("secretsDelivery") or {})


# -- the mirror --------------------------------------------------------------------------


async def test_the_report_is_mirrored_into_status_and_written_only_on_change(
    scraped: Scraped,
) -> None:
    stage = scraped.stage
    await scraped.workspace()
    await stage.run()
    revision = await staged_revision(stage)
    scraped.agentd.report = {"relayRevision": revision, "degradedReason": ""}

    await stage.run()
    ws = await stage.get()
    assert delivery(ws) == {"relayRevision": revision, "degradedReason": ""}
    await stage.run()
    assert (await stage.get())["metadata"]["resourceVersion"] == ws["metadata"]["resourceVersion"]
    assert scraped.agentd.requests == 3
    assert scraped.scrapes("ok") == 3


async def test_a_pod_that_does_not_answer_is_counted_not_blamed(scraped: Scraped) -> None:
    stage = scraped.stage
    await scraped.workspace()
    scraped.agentd.report = {"relayRevision": "r-old", "degradedReason": "token_expired"}
    await stage.run()
    scraped.agentd.status = 503
    report = await stage.run()
    scraped.agentd.status, scraped.agentd.raw = 200, b"<html>not json</html>"
    await stage.run()

    assert report.error is None
    ws = await stage.get()
    assert delivery(ws) == {"relayRevision": "r-old", "degradedReason": "token_expired"}
    staged = condition(ws, "CredentialsStaged")
    assert staged is not None and staged["status"] == "True"
    assert (scraped.scrapes("bad_status"), scraped.scrapes("bad_body")) == (1, 1)


async def test_a_closed_port_is_counted_unreachable(scraped: Scraped) -> None:
    stage = scraped.stage
    await scraped.workspace()
    assert stage.staging.health is not None
    stage.staging.health.port = 1  # nothing listens there
    report = await stage.run()
    assert report.error is None
    assert scraped.scrapes("unreachable") == 1
    assert delivery(await stage.get()) == {}


async def test_a_pod_without_the_delivery_marker_is_not_asked(scraped: Scraped) -> None:
    await scraped.workspace(marker=False)
    await scraped.stage.run()
    assert scraped.agentd.requests == 0


async def test_scrapes_across_passes_are_bounded(scraped: Scraped) -> None:
    stage = scraped.stage
    names = [f"ws-{i}" for i in range(5)]
    for name in names:
        await scraped.workspace(name)
    gate = scraped.agentd.gate = asyncio.Event()
    passes = asyncio.gather(*(stage.run(name) for name in names))
    await eventually(lambda: scraped.agentd.in_flight == 2, "two scrapes open")
    await asyncio.sleep(0.05)  # the other three passes are held back, not on their way
    assert scraped.agentd.in_flight == 2 and scraped.agentd.requests == 2
    gate.set()
    await passes
    assert scraped.agentd.requests == 5
    assert scraped.agentd.most_in_flight == 2


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
    scraped: Scraped, code: str, stale_reason: str | None, rejected: bool
) -> None:
    stage = scraped.stage
    await publish_on_rotate(stage)
    await scraped.workspace()
    await stage.run()
    scraped.agentd.report = {
        "relayRevision": await staged_revision(stage),
        "relay": {"degradedReason": code},
    }

    await stage.run()

    ws = await stage.get()
    assert delivery(ws)["degradedReason"] == code
    stale = condition(ws, "CredentialStale")
    assert (stale["reason"] if stale else None) == stale_reason
    refused = condition(ws, "CredentialRejected")
    assert (refused is not None) == rejected
    if rejected:
        assert refused is not None and refused["reason"] == "CredentialRouterRejected"
        assert len(await events(stage, "CredentialRouterRejected")) == 1
    assert stage.rotations() == 0


async def test_corruption_with_the_staged_revision_applied_escalates_a_rotation(
    scraped: Scraped,
) -> None:
    stage = scraped.stage
    await publish_on_rotate(stage)
    await scraped.workspace()
    await stage.run()
    scraped.agentd.report = {
        "relayRevision": await staged_revision(stage),
        "relay": {"degradedReason": "credential_stale"},
    }

    await stage.run()

    assert stage.rotations() == 1
    envelope = await stage.envelope("openai")
    assert envelope.startswith("stg:v1:hpke:hpke-g3:")
    assert stage.router.state.open(envelope)
    (event,) = await events(stage, "RelayRotateEscalated")
    assert "generation 3" in event["message"]


async def test_corruption_reported_for_an_older_revision_does_not_rotate(
    scraped: Scraped,
) -> None:
    stage = scraped.stage
    await publish_on_rotate(stage)
    await scraped.workspace()
    await stage.run()
    scraped.agentd.report = {"relayRevision": "r000000000000", "degradedReason": "credential_stale"}

    await stage.run()

    stale = condition(await stage.get(), "CredentialStale")
    assert stale is not None and stale["reason"] == "StaleWrongPubLineage"
    assert stage.rotations() == 0


# -- the pure parts ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"relayRevision": "r1", "degradedReason": "x"}', DeliveryHealth("r1", "x")),
        (
            b'{"relay": {"degradedReason": "token_expired"}, "degradedReason": "spawn"}',
            DeliveryHealth("", "token_expired"),
        ),
        (
            b'{"relay": {"degradedReason": ""}, "degradedReason": "spawn_env_pending"}',
            DeliveryHealth("", "spawn_env_pending"),
        ),
        (b'{"relayRevision": 7}', DeliveryHealth("", "")),
        (b"[]", None),
        (b"not json", None),
        (b"\xff\xfe", None),
    ],
)
def test_parse_health(body: bytes, expected: DeliveryHealth | None) -> None:
    assert parse_health(body) == expected


def test_a_pod_cannot_put_an_unbounded_string_into_status() -> None:
    parsed = parse_health(json.dumps({"relayRevision": "r" * 10_000}).encode())
    assert parsed is not None and len(parsed.relay_revision) == FIELD_MAX


def pod(**status: Any) -> Obj:
    return {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {"name": "sidecar", "env": [{"name": AGENTD.marker_env, "value": "1"}]},
                {"name": MAIN_CONTAINER, "env": [{"name": AGENTD.marker_env, "value": "1"}]},
            ]
        },
        "status": {"phase": "Running", "podIP": "10.0.0.7", **status},
    }


def test_scrape_target() -> None:
    assert scrape_target(pod()) == "10.0.0.7"
    assert scrape_target(None) is None
    assert scrape_target(pod(phase="Pending")) is None
    assert scrape_target(pod(podIP="")) is None
    deleting = pod()
    deleting["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    assert scrape_target(deleting) is None
    unmarked = pod()
    unmarked["spec"]["containers"][1]["env"] = [{"name": AGENTD.marker_env, "value": "0"}]
    assert scrape_target(unmarked) is None
