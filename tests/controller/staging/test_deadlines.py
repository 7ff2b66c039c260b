"""Relay staging needs no event: the manager comes back at the deadline the pass reports, so
a token is renewed at half its TTL and an unbound credential is revoked within the staleness
bound while nothing in the cluster changes."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from controller.runtime.manager import Manager
from controller.settings import ControllerSettings, RuntimeSettings
from controller.staging.clients import CredentialSource
from controller.staging.envelopes import envelope_name
from controller.staging.handoff import handoff_name
from controller.staging.secrets import RelaySecrets
from controller.staging.staging_pass import RelayStagingPass
from controller.workspace import wiring
from tests.controller.conftest import FakeRouter
from tests.controller.staging.conftest import (
    Providers,
    make_config,
    pub_secret_body,
    two_providers,
)
from tests.controller.workspace.conftest import SETTINGS
from tests.controller.workspace.factories import publish_runtime
from tests.kubeapi import KubeServer
from wspin.core.kinds import PODS, SECRETS, WORKSPACES
from wspin.core.redact import Redactor
from wspin.kube.client import Kube

Obj = dict[str, Any]
CONTROLLER = ControllerSettings(
    runtime=RuntimeSettings(health_port=0, metrics_port=0, bind_host="127.0.0.1"),
    workspace=SETTINGS,
)
STALENESS_BOUND = 1.0
"""Seconds; the revocation staleness bound these tests run with (120 s by default)."""


async def eventually(check: Callable[[], Any], what: str, timeout: float = 20.0) -> None:
    try:
        async with asyncio.timeout(timeout):
            while True:
                result = check()
                if asyncio.iscoroutine(result):
                    result = await result
                if result:
                    return
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


async def quiet(server: KubeServer, *, for_seconds: float) -> None:
    """Return once no request arrived for ``for_seconds``: no write is in flight, so no
    event is on its way to the controller."""
    seen = -1
    while seen != len(server.requests):
        seen = len(server.requests)
        await asyncio.sleep(for_seconds)


@contextlib.asynccontextmanager
async def armed(
    kube: Kube, router: FakeRouter, providers: Providers, relay_namespace: str, ttl: float
) -> AsyncIterator[RelayStagingPass]:
    router.state.generation = 2
    await kube.create(SECRETS, pub_secret_body(router.state.new_keypair(), 2), relay_namespace)
    config = make_config(router.url, relay_namespace, providers.url, ttl)
    real = RelayStagingPass(
        config,
        kube,
        redactor=Redactor(),
        relay=RelaySecrets(kube, relay_namespace),
        source=CredentialSource(config, ttl=0),
        staleness_bound=STALENESS_BOUND,
    )
    await publish_runtime(kube)
    manager = Manager(kube, CONTROLLER.runtime)
    wiring.register(manager, CONTROLLER, staging=real)
    task = asyncio.create_task(manager.run())
    try:
        await eventually(lambda: manager.is_leader or task.done(), "the manager to lead")
        yield real
    finally:
        manager.stop()
        await asyncio.wait_for(task, 30)
        await real.close()


async def make_active(kube: Kube, namespace: str, name: str = "ws1") -> None:
    ws = await kube.create(
        WORKSPACES,
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "runtime": "python",
                "storage": {"size": "1Gi"},
                "owner": {"userID": "user-1"},
            },
        },
    )
    pod = f"{name}-{ws['metadata']['uid'][:8]}"

    async def pod_exists() -> bool:
        return await kube.get_or_none(PODS, pod, namespace) is not None

    await eventually(pod_exists, "the workspace pod")
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    await kube.patch(PODS, pod, {"status": ready}, namespace, sub="status")

    async def active() -> bool:
        live = await kube.get(WORKSPACES, name, namespace)
        return (live.get("status") or {}).get("phase") == "Active"

    await eventually(active, "the Active phase")


async def test_a_token_due_for_renewal_is_renewed_with_no_event(
    kube: Kube,
    kube_server: KubeServer,
    namespace: str,
    relay_namespace: str,
    router: FakeRouter,
    providers: Providers,
) -> None:
    providers.bound["ws1"] = two_providers()[:1]
    ttl = 4.0
    async with armed(kube, router, providers, relay_namespace, ttl):
        await make_active(kube, namespace)
        await eventually(lambda: len(router.state.calls("/internal/v1/tokens")) >= 1, "a token")
        await quiet(kube_server, for_seconds=0.3)
        minted = len(router.state.calls("/internal/v1/tokens"))
        handoff = await kube.get(SECRETS, handoff_name("ws1"), namespace)

        # Nothing changes in the cluster: the renewal can only come from the deadline.
        await eventually(
            lambda: len(router.state.calls("/internal/v1/tokens")) > minted,
            "the renewal at half the TTL",
            timeout=3 * ttl,
        )
        await quiet(kube_server, for_seconds=0.3)
        renewed = await kube.get(SECRETS, handoff_name("ws1"), namespace)
        assert renewed["data"] != handoff["data"], "the handoff carries the renewed token"


async def test_an_unbound_credential_is_revoked_within_the_bound_with_no_event(
    kube: Kube,
    kube_server: KubeServer,
    namespace: str,
    relay_namespace: str,
    router: FakeRouter,
    providers: Providers,
) -> None:
    providers.bound["ws1"] = two_providers()
    async with armed(kube, router, providers, relay_namespace, 3600.0):
        await make_active(kube, namespace)

        async def envelopes() -> set[str]:
            listing = await kube.list(SECRETS, relay_namespace)
            names = {s["metadata"]["name"] for s in listing["items"]}
            return {slug for slug in ("openai", "local") if envelope_name("ws1", slug) in names}

        await eventually(lambda: _count(envelopes(), 2), "two envelopes")
        await quiet(kube_server, for_seconds=0.3)

        # The credential source stops binding one provider: no Kubernetes object changes.
        providers.bound["ws1"] = two_providers()[:1]
        unbound = time.monotonic()
        await eventually(lambda: _count(envelopes(), 1), "the revocation", timeout=10)
        elapsed = time.monotonic() - unbound
        assert elapsed < STALENESS_BOUND + 1.5, f"revoked after {elapsed:.2f} s"


async def _count(names: Any, expected: int) -> bool:
    return len(await names) == expected
