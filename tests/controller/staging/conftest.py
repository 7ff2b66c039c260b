"""Fixtures for the relay staging pass: a relay namespace, the fake router with a real X25519
keypair published as ``llm-relay-hpke-pub``, a fake credential source (the API's internal
providers endpoint, on loopback), a settable clock, and ``Stage``: one pass at a time against
the Kubernetes API, with its conditions written back the way the Workspace reconciler does."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web

from controller.staging.arming import RelayStagingConfig
from controller.staging.clients import CredentialSource
from controller.staging.envelopes import envelope_name
from controller.staging.handoff import handoff_name
from controller.staging.secrets import HPKE_PUB_SECRET, RelaySecrets, secret_value
from controller.staging.staging_pass import RelayStagingPass
from controller.toolkit import conditions as st
from controller.types import StagingReport
from tests import stub_http as serving
from tests.controller.conftest import INTERNAL_TOKEN, FakeRouter
from tests.support.clock import FakeClock
from wspin.core.kinds import NAMESPACES, SECRETS, WORKSPACES
from wspin.core.objects import Obj
from wspin.core.owners import ANNOTATION_VERIFIED_OWNER, OwnerRecord
from wspin.core.redact import Redactor
from wspin.kube.client import Kube

START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
HOUR = 3600.0

OPENAI_KEY = "sk-openai-Zq8v+/test=key-0001"
COMPAT_KEY = 'sk-compat-"quoted"-ключ-0002'


def provider(
    slug: str,
    kind: str,
    key: str,
    *,
    base_url: str = "",
    models: tuple[str, ...] = ("default-model",),
) -> Obj:
    entry: Obj = {"kind": kind, "slug": slug, "apiKey": key, "models": [{"id": m} for m in models]}
    if base_url:
        entry["baseURL"] = base_url
    return entry


def two_providers() -> list[Obj]:
    return [
        provider("openai", "openai", OPENAI_KEY, models=("gpt-4o", "gpt-4o-mini")),
        provider(
            "local",
            "openai_compatible",
            COMPAT_KEY,
            base_url="https://llm.internal.example/v1",
            models=("qwen",),
        ),
    ]


@dataclass
class Providers:
    """The API's internal endpoint: ``bound[workspace]`` is what it answers."""

    url: str = ""
    status: int = 200
    bound: dict[str, list[Obj]] = field(default_factory=dict)
    bound_for: dict[tuple[str, str], list[Obj]] = field(default_factory=dict)
    """(workspace, ownerUserID) → providers; wins over ``bound`` (two tenants, one name)."""
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    """(workspace, ownerUserID, X-Internal-Token) per request."""
    identities: list[tuple[str, str]] = field(default_factory=list)
    """(workspaceUID, namespace) per request."""
    delay: float = 0.0
    """Seconds each answer waits (lets parallel passes interleave)."""


@pytest.fixture
async def providers() -> AsyncIterator[Providers]:
    source = Providers()

    async def answer(request: web.Request) -> web.Response:
        workspace = request.match_info["workspace"]
        source.identities.append(
            (request.query.get("workspaceUID", ""), request.query.get("namespace", ""))
        )
        source.requests.append(
            (
                workspace,
                request.query.get("ownerUserID", ""),
                request.headers.get("X-Internal-Token", ""),
            )
        )
        if request.headers.get("X-Internal-Token") != INTERNAL_TOKEN:
            return web.json_response({"error": "unauthorized"}, status=401)
        if source.delay:
            await asyncio.sleep(source.delay)
        if source.status != 200:
            return web.json_response({"error": "down"}, status=source.status)
        owner = request.query.get("ownerUserID", "")
        answer = source.bound_for.get((workspace, owner), source.bound.get(workspace, []))
        return web.json_response({"providers": answer})

    app = web.Application()
    app.router.add_get("/api/v1/internal/workspaces/{workspace}/llm-providers", answer)
    runner, port = await serving.start(app, "127.0.0.1", 0)
    source.url = f"http://127.0.0.1:{port}"
    try:
        yield source
    finally:
        await runner.cleanup()


@pytest.fixture
async def relay_namespace(kube: Kube, real_cluster: bool) -> AsyncIterator[str]:
    name = f"llm-relay-{uuid.uuid4().hex[:10]}"
    await kube.create(NAMESPACES, {"metadata": {"name": name, "labels": {"wspin-test": "1"}}})
    yield name
    if real_cluster:
        await kube.delete(NAMESPACES, name)


def pub_secret_body(public_key: bytes, generation: int) -> Obj:
    payload = json.dumps(
        {"publicKey": base64.b64encode(public_key).decode(), "generation": generation}
    )
    return {
        "metadata": {"name": HPKE_PUB_SECRET},
        "data": {"payload": base64.b64encode(payload.encode()).decode()},
    }


@dataclass
class Stage:
    """One staging pass at a time for Workspaces in ``namespace``."""

    kube: Kube
    namespace: str
    relay_namespace: str
    router: FakeRouter
    providers: Providers
    clock: FakeClock
    redactor: Redactor
    staging: RelayStagingPass
    config: RelayStagingConfig

    async def workspace(
        self,
        name: str = "ws-a",
        owner: str = "user-1",
        *,
        verified: str | None = "",
        **status: Any,
    ) -> Obj:
        """A Workspace whose ``spec.owner.userID`` is ``owner`` and whose owner record (as the
        webhook writes it) names ``verified`` ("" : the same owner; None: no record, as a
        Workspace an earlier release stored)."""
        meta: Obj = {"name": name, "namespace": self.namespace}
        if verified is not None:
            record = OwnerRecord(verified or owner, "", vouched=True)
            meta["annotations"] = {ANNOTATION_VERIFIED_OWNER: record.encode()}
        created = await self.kube.create(
            WORKSPACES,
            {"metadata": meta, "spec": {"runtime": "python", "owner": {"userID": owner}}},
        )
        if status:
            created = await self.set_status(name, **status)
        return created

    async def get(self, name: str = "ws-a") -> Obj:
        return await self.kube.get(WORKSPACES, name, self.namespace)

    async def set_status(self, name: str = "ws-a", **status: Any) -> Obj:
        return await self.kube.patch(
            WORKSPACES, name, {"status": status}, self.namespace, sub="status"
        )

    async def run(self, name: str = "ws-a") -> StagingReport:
        """One pass over the live Workspace; its conditions are written back on change."""
        ws = await self.get(name)
        report = await self.staging.run(ws)
        await self.write_conditions(ws, report)
        return report

    async def write_conditions(self, ws: Obj, report: StagingReport) -> None:
        old = list((ws.get("status") or {}).get("conditions") or [])
        new = old
        for condition in report.conditions:
            new = st.set_condition(new, condition, "2026-11-29T12:00:00Z")
        new = [c for c in new if c["type"] not in report.remove]
        if new != old:
            await self.kube.patch(
                WORKSPACES,
                ws["metadata"]["name"],
                {"status": {"conditions": new}},
                self.namespace,
                sub="status",
            )

    async def publish_pub(self, public_key: bytes, generation: int) -> None:
        body = pub_secret_body(public_key, generation)
        existing = await self.kube.get_or_none(SECRETS, HPKE_PUB_SECRET, self.relay_namespace)
        if existing is None:
            await self.kube.create(SECRETS, body, self.relay_namespace)
        else:
            existing["data"] = body["data"]
            await self.kube.replace(SECRETS, existing)

    async def rotate_router(self) -> None:
        """The router rotates on its own and publishes the new key (normal recovery)."""
        self.router.state.generation += 1
        await self.publish_pub(self.router.state.new_keypair(), self.router.state.generation)

    async def envelope_secret(self, slug: str, name: str = "ws-a") -> Obj | None:
        return await self.kube.get_or_none(SECRETS, envelope_name(name, slug), self.relay_namespace)

    async def envelope(self, slug: str, name: str = "ws-a") -> str:
        secret = await self.envelope_secret(slug, name)
        assert secret is not None, f"no envelope for {slug}"
        value = secret_value(secret, "envelope")
        assert value is not None
        return value.decode()

    async def handoff(self, name: str = "ws-a") -> Obj:
        secret = await self.kube.get(SECRETS, handoff_name(name), self.namespace)
        raw = secret_value(secret, "handoff")
        assert raw is not None
        decoded: Obj = json.loads(raw)
        return decoded

    async def handoff_raw(self, name: str = "ws-a") -> bytes | None:
        secret = await self.kube.get_or_none(SECRETS, handoff_name(name), self.namespace)
        return secret_value(secret, "handoff") if secret else None

    def mints(self) -> int:
        return len(self.router.state.calls("/internal/v1/tokens"))

    def rotations(self) -> int:
        return len(self.router.state.calls("/internal/v1/keys/rotate"))


def condition(ws: Obj, type_: str) -> Obj | None:
    return st.find_condition((ws.get("status") or {}).get("conditions") or [], type_)


def make_config(
    router_url: str, relay_namespace: str, api_url: str, ttl: float
) -> RelayStagingConfig:
    return RelayStagingConfig(
        router_url=router_url,
        namespace=relay_namespace,
        token_ttl=ttl,
        api_service_url=api_url,
        internal_token=INTERNAL_TOKEN,
    )


@pytest.fixture
async def stage(
    kube: Kube,
    namespace: str,
    relay_namespace: str,
    router: FakeRouter,
    providers: Providers,
) -> AsyncIterator[Stage]:
    clock = FakeClock(START)
    router.state.generation = 2
    config = make_config(router.url, relay_namespace, providers.url, HOUR)
    redactor = Redactor()
    staging = RelayStagingPass(
        config,
        kube,
        redactor=redactor,
        relay=RelaySecrets(kube, relay_namespace),
        source=CredentialSource(config, ttl=0),
        clock=clock,
    )
    result = Stage(
        kube, namespace, relay_namespace, router, providers, clock, redactor, staging, config
    )
    await result.publish_pub(router.state.new_keypair(), 2)
    yield result
    await staging.close()
