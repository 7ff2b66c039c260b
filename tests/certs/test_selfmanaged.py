"""Self-managed mode against the Kubernetes API test server: the Lease holder creates the
Secret and publishes the CA; every replica serves what the Secret holds, without restarts."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import datetime
import logging
from collections.abc import AsyncIterator, Callable
from typing import cast

import pytest
from prometheus_client import CollectorRegistry

from certs.authority import apply_step, next_step
from certs.build import KeyPair, issue_serving, signed_by
from certs.metrics import CertificateMetrics
from certs.reports import ServingReports
from certs.selfmanaged import SelfManagedSettings, SelfManagedSource
from certs.store import SecretStore, Stored
from tests.certs.conftest import (
    SECRET,
    TEST_POLICY,
    Webhooks,
    create_configurations,
    delete_configurations,
    handshake,
    hold_the_lease_for_a_replica_that_is_gone,
    published_bundle,
    replica,
    serve,
)
from tests.kubeapi import KubeServer
from tests.support.metrics import count
from tests.support.waiting import eventually
from wspin.core.errors import Conflict
from wspin.core.kinds import LEASES, MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS
from wspin.kube.client import Kube


@contextlib.asynccontextmanager
async def running(*sources: SelfManagedSource) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(s.run()) for s in sources]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_the_first_replica_creates_publishes_and_serves(
    kube: Kube, namespace: str, webhooks: Webhooks
) -> None:
    source = replica(kube, namespace, webhooks, "replica-a")
    assert not source.healthy()
    async with running(source), serve(source) as port:
        await eventually(source.healthy)
        stored = await SecretStore(kube, namespace, SECRET).read()
        assert stored.ca is not None and stored.serving is not None
        assert stored.published
        bundles = await published_bundle(kube, webhooks)
        assert bundles == [stored.bundle_pem] * 3
        served = await handshake(port, bundles[0])
        assert served == stored.serving.cert
        assert signed_by(served, stored.ca.cert)
        assert source.not_after() == stored.serving.not_after


async def test_only_the_lease_holder_writes_and_every_replica_serves_the_same_certificate(
    kube: Kube, namespace: str, webhooks: Webhooks, kube_server: KubeServer
) -> None:
    sources = [replica(kube, namespace, webhooks, name) for name in ("a", "b", "c")]
    async with contextlib.AsyncExitStack() as stack:
        ports = [await stack.enter_async_context(serve(s)) for s in sources]
        await stack.enter_async_context(running(*sources))
        await eventually(lambda: all(s.healthy() for s in sources))
        marks = [s.rounds for s in sources]
        # Several more rounds for every replica: only the leader writes in any of them.
        await eventually(
            lambda: all(s.rounds >= m + 3 for s, m in zip(sources, marks, strict=True))
        )
        stored = await SecretStore(kube, namespace, SECRET).read()
        assert stored.serving is not None
        for port in ports:
            assert await handshake(port, stored.bundle_pem) == stored.serving.cert
    secret_writes = [w.method for w in kube_server.writes if "/secrets" in w.path]
    assert secret_writes == ["POST", "PUT"]  # the leader's create, then its publication record


async def test_a_follower_waits_for_the_secret_then_serves_each_new_certificate(
    kube: Kube, namespace: str, webhooks: Webhooks
) -> None:
    # Another replica holds the Lease for the whole test.
    now = datetime.datetime.now(datetime.UTC)
    await kube.create(
        LEASES,
        {
            "metadata": {"name": f"{SECRET}-authority", "namespace": namespace},
            "spec": {
                "holderIdentity": "elsewhere",
                "leaseDurationSeconds": 3600,
                "acquireTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            },
        },
    )
    follower = replica(kube, namespace, webhooks, "follower")
    store = SecretStore(kube, namespace, SECRET)
    async with running(follower), serve(follower) as port:
        await eventually(lambda: follower.rounds >= 3)
        assert not follower.healthy()
        assert (await store.read()) == Stored()  # a follower never creates it
        # The leader (elsewhere) creates the Secret.
        earlier = now - datetime.timedelta(hours=1)
        stored = await store.write(apply_step("create", Stored(), earlier, TEST_POLICY))
        await eventually(follower.healthy)
        assert stored.serving is not None
        assert await handshake(port, stored.bundle_pem) == stored.serving.cert
        # ...and later renews the leaf: the follower serves it without a restart.
        renewed = await store.write(apply_step("renew-serving", stored, now, TEST_POLICY))
        assert renewed.serving is not None
        await eventually(lambda: follower.not_after() == renewed.serving.not_after)  # type: ignore[union-attr]
        assert await handshake(port, stored.bundle_pem) == renewed.serving.cert
    assert next_step(renewed, now, TEST_POLICY).step == "publish"  # the follower did not publish


async def test_the_leader_restores_a_cabundle_that_an_upgrade_wiped(
    kube: Kube, namespace: str, webhooks: Webhooks
) -> None:
    source = replica(kube, namespace, webhooks, "a")
    async with running(source):
        await eventually(source.healthy)
        config = await kube.get(MUTATING_WEBHOOKS, webhooks.mutating)
        for entry in config["webhooks"]:
            entry["clientConfig"].pop("caBundle")
        await kube.replace(MUTATING_WEBHOOKS, config)
        stored = await SecretStore(kube, namespace, SECRET).read()

        async def restored() -> bool:
            return (await published_bundle(kube, webhooks)) == [stored.bundle_pem] * 3

        async with asyncio.timeout(10):
            while not await restored():
                await asyncio.sleep(0.02)


async def test_after_a_reinstall_a_replica_publishes_the_ca_at_once_and_is_unready_until_then(
    kube: Kube, namespace: str, webhooks: Webhooks
) -> None:
    first = replica(kube, namespace, webhooks, "old-release")
    async with running(first):
        await eventually(lambda: first.healthy() and first.trust_problem() is None)
    stored = await SecretStore(kube, namespace, SECRET).read()
    assert stored.published
    # `helm uninstall`: the configurations go; the Secret stays, and so does the Lease, held
    # by a replica whose release was refused.
    await delete_configurations(kube, webhooks)
    await hold_the_lease_for_a_replica_that_is_gone(kube, namespace)

    successor = replica(kube, namespace, webhooks, "new-release")
    async with running(successor):
        await eventually(lambda: successor.healthy() and successor.rounds >= 3)
        assert f"{webhooks.mutating}: not found" in (successor.trust_problem() or "")
        # `helm install` again: new configurations, without a caBundle.
        await create_configurations(kube, webhooks)
        await eventually(lambda: successor.trust_problem() is None, "the CA published")
        assert await published_bundle(kube, webhooks) == [stored.bundle_pem] * 3
        assert not successor.leadership.is_leader  # it did not wait for the hour-long Lease
    assert (await SecretStore(kube, namespace, SECRET).read()) == stored  # nothing re-issued


async def test_a_follower_is_unready_while_a_configuration_lacks_its_ca_and_fills_no_bundle(
    kube: Kube, namespace: str, webhooks: Webhooks
) -> None:
    """A bundle someone else chose (another CA) is the leader's to replace, never a
    follower's: the follower only reports it."""
    await hold_the_lease_for_a_replica_that_is_gone(kube, namespace)
    now = datetime.datetime.now(datetime.UTC)
    store = SecretStore(kube, namespace, SECRET)
    created = await store.write(apply_step("create", Stored(), now, TEST_POLICY))
    await store.write(apply_step("publish", created, now, TEST_POLICY))
    other = apply_step("create", Stored(), now, TEST_POLICY)
    config = await kube.get(VALIDATING_WEBHOOKS, webhooks.validating)
    for entry in config["webhooks"]:
        entry["clientConfig"]["caBundle"] = base64.b64encode(other.bundle_pem).decode()
    await kube.replace(VALIDATING_WEBHOOKS, config)
    follower = replica(kube, namespace, webhooks, "follower")
    async with running(follower):
        await eventually(lambda: follower.healthy() and follower.rounds >= 3)
        problem = follower.trust_problem() or ""
        assert f"{webhooks.validating}: no CA that signed the served certificate" in problem
        assert f"{webhooks.mutating}:" not in problem  # filled: it carried no bundle at all
    validating = await kube.get(VALIDATING_WEBHOOKS, webhooks.validating)
    assert (
        validating["webhooks"][0]["clientConfig"]["caBundle"]
        == config["webhooks"][0]["clientConfig"]["caBundle"]
    )


async def test_api_failures_are_logged_with_the_fix_and_retried(
    kube: Kube,
    namespace: str,
    webhooks: Webhooks,
    kube_server: KubeServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="wspin.certs")
    source = replica(kube, namespace, webhooks, "a")
    kube_server.fail_next(403, method="GET", path=f"/api/v1/namespaces/{namespace}/secrets")
    assert await source.round() == pytest.approx(0.05)
    assert not source.healthy()
    record = next(r for r in caplog.records if "round failed" in r.getMessage())
    assert "grant the webhook's service account" in record.fields["fix"]  # type: ignore[attr-defined]
    async with running(source):
        await eventually(source.healthy)


async def test_a_missing_webhook_configuration_delays_publication_not_serving(
    kube: Kube, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="wspin.certs")
    source = replica(kube, namespace, Webhooks("absent-m", "absent-v"), "a")
    async with running(source):
        await eventually(source.healthy)
        await eventually(
            lambda: any("caBundle not patched" in r.getMessage() for r in caplog.records)
        )
    stored = await SecretStore(kube, namespace, SECRET).read()
    assert not stored.published


class WinsDuringTheFirstRound:
    """A Lease that is won while the first round is still loading the Secret's certificate
    (a rollout: the Secret exists, and the old leader has just released the Lease)."""

    def __init__(self) -> None:
        self.leading = False
        self.listeners: list[Callable[[bool], None]] = []

    @property
    def is_leader(self) -> bool:
        if not self.leading:
            asyncio.get_running_loop().call_soon(self.win)
        return self.leading

    def win(self) -> None:
        if not self.leading:
            self.leading = True
            for listener in self.listeners:
                listener(True)

    def add_listener(self, listener: Callable[[bool], None]) -> None:
        self.listeners.append(listener)

    async def run(self) -> None:
        await asyncio.Event().wait()

    async def release(self) -> bool:
        return True


UNUSED_REPORTS = ServingReports(cast(Kube, None), "ns", f"{SECRET}-serving", "svc")
"""These sources have no pod name, so they report nothing and never rotate a CA."""


class CountingStore(SecretStore):
    """Always reads ``stored``; counts the rounds."""

    def __init__(self, stored: Stored) -> None:
        super().__init__(cast(Kube, None), "ns", SECRET)
        self.stored = stored
        self.reads = 0

    async def read(self) -> Stored:
        self.reads += 1
        return self.stored


async def test_leadership_won_during_a_round_starts_the_next_round_at_once() -> None:
    now = datetime.datetime.now(datetime.UTC)
    stored = apply_step(
        "publish", apply_step("create", Stored(), now, TEST_POLICY), now, TEST_POLICY
    )
    store = CountingStore(stored)
    leadership = WinsDuringTheFirstRound()
    settings = SelfManagedSettings(SECRET, "ns", TEST_POLICY, webhooks=(), refresh=60.0)
    source = SelfManagedSource(
        store, settings, leadership, reports=UNUSED_REPORTS, metrics=unused_metrics()
    )
    async with running(source):
        await eventually(lambda: store.reads >= 2, timeout=5.0)
    assert leadership.leading


class AlwaysLeading(WinsDuringTheFirstRound):
    def __init__(self) -> None:
        super().__init__()
        self.leading = True


class ConflictingStore(CountingStore):
    """Every write loses to a writer that got there first, until ``conflicts`` runs out."""

    def __init__(self, conflicts: int) -> None:
        super().__init__(Stored())
        self.conflicts = conflicts

    async def write(self, stored: Stored) -> Stored:
        if self.conflicts > 0:
            self.conflicts -= 1
            raise Conflict("update secrets ns/wspin-webhook-tls: the object has been modified")
        self.stored = dataclasses.replace(stored, resource_version="1")
        return self.stored


async def test_a_secret_that_keeps_changing_is_re_read_with_a_growing_pause() -> None:
    store = ConflictingStore(conflicts=7)
    settings = SelfManagedSettings(SECRET, "ns", TEST_POLICY, webhooks=(), refresh=1.0)
    source = SelfManagedSource(
        store, settings, AlwaysLeading(), reports=UNUSED_REPORTS, metrics=unused_metrics()
    )
    delays = [await source.round() for _ in range(7)]
    assert delays == [0.0, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert await source.round() == 1.0  # the writes went through: settled until refresh
    assert source.healthy()
    store.stored, store.conflicts = Stored(), 1
    assert await source.round() == 0.0  # a success resets the pause


class LosesAfterFirstCheck(WinsDuringTheFirstRound):
    """Leading when the round starts, lost by the time the first step is written."""

    def __init__(self) -> None:
        super().__init__()
        self.checks = 0

    @property
    def is_leader(self) -> bool:
        self.checks += 1
        return self.checks <= 2


class RecordingStore(ConflictingStore):
    def __init__(self) -> None:
        super().__init__(conflicts=0)
        self.writes: list[Stored] = []

    async def write(self, stored: Stored) -> Stored:
        self.writes.append(stored)
        return await super().write(stored)


async def test_a_leader_that_loses_the_lease_mid_round_takes_no_further_step() -> None:
    store = RecordingStore()
    settings = SelfManagedSettings(SECRET, "ns", TEST_POLICY, webhooks=(), refresh=1.0)
    source = SelfManagedSource(
        store, settings, LosesAfterFirstCheck(), reports=UNUSED_REPORTS, metrics=unused_metrics()
    )
    await source.round()
    assert len(store.writes) == 1  # "create"; "publish" needed the Lease it no longer held
    assert store.stored.serving is not None and not store.stored.published


def unused_metrics() -> CertificateMetrics:
    return CertificateMetrics(CollectorRegistry())


@pytest.mark.parametrize("kind", ["expired", "not-yet-valid", "key-mismatch"])
async def test_a_replica_keeps_its_certificate_when_the_secret_gets_a_bad_pair(
    kube: Kube,
    namespace: str,
    webhooks: Webhooks,
    kind: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every replica reads the same Secret: a bad pair there must not reach any of them."""
    day = datetime.timedelta(days=1)
    now = datetime.datetime.now(datetime.UTC)
    registry = CollectorRegistry()
    metrics = CertificateMetrics(registry)
    # No campaign: it never leads.
    follower = replica(kube, namespace, webhooks, "follower", metrics=metrics)
    store = SecretStore(kube, namespace, SECRET)
    good = await store.write(apply_step("create", Stored(), now - 30 * day, TEST_POLICY))
    assert good.ca is not None and good.serving is not None
    names = list(TEST_POLICY.dns_names)
    if kind == "expired":
        bad = issue_serving(good.ca, names, now - 10 * day, day)
    elif kind == "not-yet-valid":
        bad = issue_serving(good.ca, names, now + 10 * day)
    else:
        bad = KeyPair(issue_serving(good.ca, names, now).cert, good.serving.key)
    caplog.set_level(logging.WARNING, logger="wspin.certs")
    async with serve(follower) as port:
        await follower.round()
        assert await handshake(port, good.bundle_pem) == good.serving.cert
        await store.write(dataclasses.replace(good, serving=bad))
        for _ in range(3):
            await follower.round()
        assert await handshake(port, good.bundle_pem) == good.serving.cert
    assert follower.healthy()
    rejected = count(registry, "wspin_webhook_certificate_reload_rejected_total", reason=kind)
    assert rejected == 1  # counted once, not once per round
    lines = [r for r in caplog.records if "not loaded" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].fields["reason"] == kind  # type: ignore[attr-defined]
    assert "still serving the previous one" in lines[0].getMessage()
