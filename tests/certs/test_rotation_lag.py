"""A CA rotation where one of two replicas lags: the old CA stays in the caBundle until the
lagging replica serves the new leaf, and no admission request fails meanwhile.

Replica ``a`` runs as the webhook runs it (campaigns, holds the Lease, drives the rotation).
Replica ``b`` is driven round by round, so the test decides when it stops re-reading the
Secret (it lags: it keeps serving the old CA's leaf) and when it catches up. Both sit in the
webhook Service's EndpointSlice, both take traffic throughout, and the client shakes hands
with both on every request (``tests.certs.traffic``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging

import pytest
from prometheus_client import CollectorRegistry

from certs.build import renew_at, signed_by
from certs.metrics import CertificateMetrics
from certs.reports import leaf_fingerprint, reports_name
from certs.selfmanaged import SelfManagedSource
from certs.store import SecretStore, Stored
from tests.certs.conftest import (
    SECRET,
    Webhooks,
    endpoint_slice,
    handshake,
    replica,
    serve,
)
from tests.certs.traffic import DAY, HOUR, POLICY, ApiServerClient, background
from tests.support.clock import FakeClock
from tests.support.metrics import sample
from tests.support.waiting import eventually
from wspin.core.kinds import CONFIGMAPS
from wspin.kube.client import Kube


class Paced:
    """Runs ``source.round()`` every 20 ms while ``going`` is set (no Lease campaign)."""

    def __init__(self, source: SelfManagedSource) -> None:
        self.source = source
        self.going = asyncio.Event()
        self.going.set()
        self.rounds = 0

    async def run(self) -> None:
        while True:
            await self.going.wait()
            await self.source.round()
            self.rounds += 1
            await asyncio.sleep(0.02)

    async def pause(self) -> None:
        self.going.clear()
        seen = self.rounds
        await asyncio.sleep(0.1)  # a round already under way finishes
        assert self.rounds <= seen + 1


def shared_metrics() -> tuple[CollectorRegistry, CertificateMetrics]:
    """One registry both replicas report on: the gauges are the Lease holder's."""
    registry = CollectorRegistry()
    return registry, CertificateMetrics(registry)


async def test_the_old_ca_stays_until_a_lagging_replica_serves_the_new_leaf(
    kube: Kube, namespace: str, webhooks: Webhooks, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(datetime.datetime.now(datetime.UTC) - 90 * DAY)
    await endpoint_slice(kube, namespace, {"a": True, "b": True})
    store = SecretStore(kube, namespace, SECRET)
    registry, metrics = shared_metrics()
    a = replica(kube, namespace, webhooks, "a", policy=POLICY, clock=clock, metrics=metrics)
    b = replica(kube, namespace, webhooks, "b", policy=POLICY, clock=clock, metrics=metrics)
    lagging = Paced(b)
    caplog.set_level(logging.INFO, logger="wspin.certs")

    async def stored() -> Stored:
        return await store.read()

    async def serves(port: int, state: Stored) -> bool:
        assert state.serving is not None
        return await handshake(port, state.bundle_pem) == state.serving.cert

    async with contextlib.AsyncExitStack() as stack:
        port_a = await stack.enter_async_context(serve(a))
        port_b = await stack.enter_async_context(serve(b))
        client = ApiServerClient(kube, webhooks, [(port_a, a.healthy), (port_b, b.healthy)])
        await stack.enter_async_context(background(a.run(), lagging.run()))
        await stack.enter_async_context(
            background(client.watch_bundle(), client.send(False), client.send(True))
        )

        async def steady() -> bool:
            state = await stored()
            return (
                state.published
                and state.serving is not None
                and b.healthy()
                and client.context is not None
                and await serves(port_a, state)
                and await serves(port_b, state)
            )

        await eventually(steady, "both replicas serve the first leaf")
        first = await stored()
        assert first.ca is not None

        # The CA rotation starts: both CAs are published, the client trusts both.
        clock.set(renew_at(first.ca.cert))
        await eventually(
            lambda: len(client.bundle.split(b"-----BEGIN")) == 3,
            "the client trusts old and new CA",
        )
        rotating = await stored()

        # b stops re-reading the Secret; a switches the leaf to the new CA.
        await lagging.pause()
        clock.advance(HOUR)

        async def a_switched() -> bool:
            state = await stored()
            return (
                state.ca is not None
                and state.serving is not None
                and signed_by(state.serving.cert, state.ca.cert)
                and await serves(port_a, state)
            )

        await eventually(a_switched, "replica a serves the new CA's leaf")
        switched = await stored()
        assert switched.serving is not None and rotating.serving is not None
        assert await handshake(port_b, switched.bundle_pem) == rotating.serving.cert  # b lags

        # Long past propagation: a holds the old CA in, says so in a metric and a log line.
        clock.advance(3 * HOUR)
        await eventually(
            lambda: sample(registry, "wspin_webhook_ca_rotation_held") == 1.0,
            "the rotation is reported as held",
        )
        assert sample(registry, "wspin_webhook_ca_rotation_lagging_replicas") == 1.0
        (held,) = [r for r in caplog.records if "old CA kept" in r.getMessage()]
        assert held.levelno == logging.WARNING
        assert held.fields["lagging"] == ["b"]  # type: ignore[attr-defined]
        mark = dict(client.ok_by_port)
        await eventually(
            lambda: all(client.ok_by_port[p] >= mark.get(p, 0) + 10 for p in (port_a, port_b)),
            "requests to both replicas succeed while b lags",
        )
        still = await stored()
        assert len(still.bundle) == 2 and still.bundle == switched.bundle
        reports = await kube.get(CONFIGMAPS, reports_name(SECRET), namespace)
        assert set(reports["data"]) == {"a", "b"}
        assert leaf_fingerprint(rotating.serving.cert) in reports["data"]["b"]

        # b catches up: it serves the new leaf, reports it, and only then is the old CA dropped.
        lagging.going.set()

        async def finished() -> bool:
            state = await stored()
            return (
                len(state.bundle) == 1
                and state.published
                and client.bundle == state.bundle_pem
                and await serves(port_a, state)
                and await serves(port_b, state)
            )

        await eventually(finished, "the old CA leaves the bundle after b catches up")
        assert sample(registry, "wspin_webhook_ca_rotation_held") == 0.0
        mark = dict(client.ok_by_port)
        await eventually(
            lambda: all(client.ok_by_port[p] >= mark.get(p, 0) + 10 for p in (port_a, port_b)),
            "requests to both replicas succeed after the rotation",
        )

    assert client.failures == []
    assert [len(b.split(b"-----BEGIN")) - 1 for b in client.bundles_seen] == [1, 2, 1]


async def test_a_replica_that_is_not_ready_does_not_hold_the_rotation(
    kube: Kube, namespace: str, webhooks: Webhooks
) -> None:
    """Only endpoints the Service routes to must report: an unready one gets no traffic."""
    clock = FakeClock(datetime.datetime.now(datetime.UTC) - 90 * DAY)
    await endpoint_slice(kube, namespace, {"a": True, "gone": False})
    store = SecretStore(kube, namespace, SECRET)
    a = replica(kube, namespace, webhooks, "a", policy=POLICY, clock=clock)
    async with background(a.run()):
        await eventually(lambda: _published(store), "the Secret is published")
        first = await store.read()
        assert first.ca is not None
        clock.set(renew_at(first.ca.cert))
        await eventually(lambda: _bundle_size(store, 2), "both CAs are published")
        clock.advance(HOUR)
        await eventually(lambda: _bundle_size(store, 1), "the rotation finishes without 'gone'")


async def _published(store: SecretStore) -> bool:
    return (await store.read()).published


async def _bundle_size(store: SecretStore, size: int) -> bool:
    state = await store.read()
    return state.published and len(state.bundle) == size
