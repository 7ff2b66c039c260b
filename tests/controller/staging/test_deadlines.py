"""Relay staging needs no event: the manager comes back at the deadline the pass reports, so
a token is renewed at half its TTL and an unbound credential is revoked within the staleness
bound while nothing in the cluster changes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from controller.runtime.manager import Manager
from controller.settings import ControllerSettings, RuntimeSettings
from controller.staging.clients import CredentialSource
from controller.staging.envelopes import envelope_name
from controller.staging.handoff import handoff_name
from controller.staging.secrets import RelaySecrets
from controller.staging.staging_pass import RelayStagingPass
from controller.types import ObjectKey
from controller.workspace import wiring
from tests.controller.conftest import FakeRouter
from tests.controller.staging.conftest import (
    Providers,
    make_config,
    pub_secret_body,
    two_providers,
)
from tests.controller.workspace.conftest import SETTINGS
from tests.controller.workspace.factories import TEST_KEYS, publish_runtime, ready_pod_status
from tests.support.owners import recorded
from tests.support.waiting import eventually
from wspin.core.kinds import PODS, SECRETS, WORKSPACES
from wspin.core.redact import Redactor
from wspin.kube.client import Kube

CONTROLLER = ControllerSettings(
    runtime=RuntimeSettings(health_port=0, metrics_port=0, bind_host="127.0.0.1"),
    workspace=SETTINGS,
)
STALENESS_BOUND = 1.0
"""Seconds; the revocation staleness bound these tests run with (120 s by default)."""


def waiting_on_a_deadline(manager: Manager, key: ObjectKey) -> float | None:
    """Seconds until ``key`` comes back, once nothing is queued or running and only its
    deadline is left (no write is in flight, so no event is on its way); else None."""
    queue = manager.queue_of("workspace")
    if len(queue) or queue.in_flight:
        return None
    return queue.delay_of(key)


@contextlib.asynccontextmanager
async def armed(
    kube: Kube, router: FakeRouter, providers: Providers, relay_namespace: str, ttl: float
) -> AsyncIterator[Manager]:
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
    wiring.register(manager, CONTROLLER, keys=TEST_KEYS, staging=real)
    task = asyncio.create_task(manager.run())
    try:
        await eventually(lambda: manager.is_leader or task.done(), "the manager to lead")
        yield manager
    finally:
        manager.stop()
        await asyncio.wait_for(task, 30)
        await real.close()


async def make_active(kube: Kube, namespace: str, name: str = "ws1") -> None:
    ws = await kube.create(
        WORKSPACES,
        recorded(
            {
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "runtime": "python",
                    "storage": {"size": "1Gi"},
                    "owner": {"userID": "user-1"},
                },
            }
        ),
    )
    pod = f"{name}-{ws['metadata']['uid'][:8]}"

    async def pod_exists() -> bool:
        return await kube.get_or_none(PODS, pod, namespace) is not None

    await eventually(pod_exists, "the workspace pod")
    ready = ready_pod_status()
    await kube.patch(PODS, pod, {"status": ready}, namespace, sub="status")

    async def active() -> bool:
        live = await kube.get(WORKSPACES, name, namespace)
        return (live.get("status") or {}).get("phase") == "Active"

    await eventually(active, "the Active phase")


async def test_a_token_due_for_renewal_is_renewed_with_no_event(
    kube: Kube,
    namespace: str,
    relay_namespace: str,
    router: FakeRouter,
    providers: Providers,
) -> None:
    providers.bound["ws1"] = two_providers()[:1]
    ttl = 4.0
    async with armed(kube, router, providers, relay_namespace, ttl) as manager:
        await make_active(kube, namespace)
        await eventually(lambda: len(router.state.calls("/internal/v1/tokens")) >= 1, "a token")
        await eventually(
            lambda: waiting_on_a_deadline(manager, ObjectKey(namespace, "ws1")),
            "only the deadline left",
        )
        delay = waiting_on_a_deadline(manager, ObjectKey(namespace, "ws1"))
        assert delay is not None and delay <= ttl / 2, "back by half the TTL"
        minted = len(router.state.calls("/internal/v1/tokens"))
        handoff = await kube.get(SECRETS, handoff_name("ws1"), namespace)

        # Nothing changes in the cluster: the renewal can only come from the deadline.
        await eventually(
            lambda: len(router.state.calls("/internal/v1/tokens")) > minted,
            "the renewal at half the TTL",
            timeout=3 * ttl,
        )
        await eventually(
            lambda: waiting_on_a_deadline(manager, ObjectKey(namespace, "ws1")),
            "the handoff written",
        )
        renewed = await kube.get(SECRETS, handoff_name("ws1"), namespace)
        assert renewed["data"] != handoff["data"], "the handoff carries the renewed token"


async def test_an_unbound_credential_is_revoked_within_the_bound_with_no_event(
    kube: Kube,
    namespace: str,
    relay_namespace: str,
    router: FakeRouter,
    providers: Providers,
) -> None:
    providers.bound["ws1"] = two_providers()
    async with armed(kube, router, providers, relay_namespace, 3600.0) as manager:
        await make_active(kube, namespace)

        async def envelopes() -> set[str]:
            listing = await kube.list(SECRETS, relay_namespace)
            names = {s["metadata"]["name"] for s in listing["items"]}
            return {slug for slug in ("openai", "local") if envelope_name("ws1", slug) in names}

        await eventually(lambda: _count(envelopes(), 2), "two envelopes")
        await eventually(
            lambda: waiting_on_a_deadline(manager, ObjectKey(namespace, "ws1")),
            "only the deadline left",
        )
        # Back within the staleness bound with no event: that pass sees the unbinding.
        delay = waiting_on_a_deadline(manager, ObjectKey(namespace, "ws1"))
        assert delay is not None and delay <= STALENESS_BOUND

        # The credential source stops binding one provider: no Kubernetes object changes.
        providers.bound["ws1"] = two_providers()[:1]
        await eventually(lambda: _count(envelopes(), 1), "the revocation", timeout=10)


async def _count(names: Any, expected: int) -> bool:
    return len(await names) == expected
