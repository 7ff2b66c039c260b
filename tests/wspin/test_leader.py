"""Lease-based leader election against the API: one leader, takeover, release, loss."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes_asyncio.client import ApiClient

from tests.kubeapi import KubeServer
from tests.support.waiting import eventually
from wspin.core.errors import ConfigError
from wspin.core.kinds import LEASES, Resource
from wspin.core.objects import Obj
from wspin.kube.client import Kube
from wspin.kube.leader import LeaderElector, LeaseSettings

# Short, but in the production proportions (15 / 10 / 2).
LEASE, RENEW, RETRY = 1.5, 1.0, 0.2


def elector(kube: Kube, namespace: str, identity: str) -> LeaderElector:
    return LeaderElector(
        kube,
        LeaseSettings(
            namespace=namespace,
            name="test-lease",
            identity=identity,
            lease_duration=LEASE,
            renew_deadline=RENEW,
            retry_period=RETRY,
        ),
    )


@contextlib.asynccontextmanager
async def running(candidate: LeaderElector) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(candidate.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def holder(kube: Kube, namespace: str) -> str | None:
    lease = await kube.get(LEASES, "test-lease", namespace)
    value: str | None = lease["spec"].get("holderIdentity")
    return value


async def test_a_single_candidate_acquires_and_records_itself_in_the_lease(
    kube: Kube, namespace: str
) -> None:
    one = elector(kube, namespace, "one")
    async with running(one):
        await asyncio.wait_for(one.wait_until_leading(), 5)
        assert one.is_leader
        assert not one.lost.is_set()
        assert await holder(kube, namespace) == "one"
        lease = await kube.get(LEASES, "test-lease", namespace)
        assert lease["spec"]["leaseDurationSeconds"] == 2
        assert lease["spec"]["renewTime"].endswith("Z")


async def test_two_candidates_never_lead_together_and_the_second_takes_over_after_a_kill(
    kube: Kube, namespace: str
) -> None:
    first, second = elector(kube, namespace, "first"), elector(kube, namespace, "second")
    first_task = asyncio.create_task(first.run())
    await asyncio.wait_for(first.wait_until_leading(), 5)
    async with running(second):
        for _ in range(int(2 * LEASE / 0.05)):  # well past a lease duration of renewals
            assert not (first.is_leader and second.is_leader)
            await asyncio.sleep(0.05)
        assert first.is_leader and not second.is_leader
        # Kill the leader without a release: the successor waits for the lease to expire.
        first_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first_task
        loop = asyncio.get_running_loop()
        killed_at = loop.time()
        await asyncio.wait_for(second.wait_until_leading(), LEASE + 3 * RETRY + 2)
        assert loop.time() - killed_at >= LEASE * 0.9, "took over before the lease expired"
        assert await holder(kube, namespace) == "second"
        lease = await kube.get(LEASES, "test-lease", namespace)
        assert lease["spec"]["leaseTransitions"] == 1


async def test_release_hands_the_lease_over_without_waiting_for_expiry(
    kube: Kube, namespace: str
) -> None:
    first, second = elector(kube, namespace, "first"), elector(kube, namespace, "second")
    async with running(first) as first_task:
        await asyncio.wait_for(first.wait_until_leading(), 5)
        async with running(second):
            await eventually(lambda: second.observed_holder == "first", "second sees first lead")
            first_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await first_task
            assert await first.release()
            loop = asyncio.get_running_loop()
            released_at = loop.time()
            await asyncio.wait_for(second.wait_until_leading(), 5)
            assert loop.time() - released_at < LEASE, "waited for expiry despite release"


async def test_release_by_a_non_holder_changes_nothing(kube: Kube, namespace: str) -> None:
    first, other = elector(kube, namespace, "first"), elector(kube, namespace, "other")
    async with running(first):
        await asyncio.wait_for(first.wait_until_leading(), 5)
        assert not await other.release()
        assert await holder(kube, namespace) == "first"


async def test_a_leader_that_cannot_renew_stops_leading_within_the_renew_deadline(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    one = elector(kube, namespace, "one")
    changes: list[bool] = []
    one.add_listener(changes.append)
    async with running(one):
        await asyncio.wait_for(one.wait_until_leading(), 5)
        kube_server.fail_next(503, path="/apis/coordination.k8s.io", count=1000)
        loop = asyncio.get_running_loop()
        failing_since = loop.time()
        await asyncio.wait_for(one.lost.wait(), RENEW + 2 * RETRY + 1)
        assert not one.is_leader
        assert loop.time() - failing_since < LEASE, "still leading when others may take over"
        assert changes == [True, False]


async def test_the_renew_deadline_counts_from_when_the_renewal_was_sent_not_answered(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    # A follower measures the lease from the moment it saw the write, which can be long before
    # a slow answer reaches the leader; the leader must stop within the lease duration of the
    # write, or both lead at once.
    slow = SlowRenewals(kube.api)
    one = elector(slow, namespace, "one")
    async with running(one):
        await asyncio.wait_for(one.wait_until_leading(), 5)
        slow.delay = 0.6  # the next renewal's answer arrives late ...
        await asyncio.wait_for(slow.answered.wait(), 5)
        kube_server.fail_next(503, path="/apis/coordination.k8s.io", count=1000)  # ... then none
        await asyncio.wait_for(one.lost.wait(), LEASE + 2)
        loop = asyncio.get_running_loop()
        assert loop.time() - slow.sent_at < LEASE, "still leading when others may take over"


class SlowRenewals(Kube):
    """Answers one lease write ``delay`` seconds after the API server applied it."""

    def __init__(self, api: ApiClient) -> None:
        super().__init__(api)
        self.delay = 0.0
        self.sent_at = 0.0
        self.answered = asyncio.Event()

    async def replace(self, res: Resource, obj: Obj, *, sub: str = "") -> Obj:
        delay, self.delay = self.delay, 0.0
        if not delay:
            return await super().replace(res, obj, sub=sub)
        self.sent_at = asyncio.get_running_loop().time()
        result = await super().replace(res, obj, sub=sub)
        await asyncio.sleep(delay)
        self.answered.set()
        return result


async def test_run_while_leading_cancels_the_work_the_moment_the_lease_is_lost(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    one = elector(kube, namespace, "one")
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def work() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async with running(one):
        worker = asyncio.create_task(one.run_while_leading(work))
        try:
            await asyncio.wait_for(started.wait(), 5)
            kube_server.fail_next(503, path="/apis/coordination.k8s.io", count=1000)
            await asyncio.wait_for(one.lost.wait(), RENEW + 2)
            await asyncio.wait_for(cancelled.wait(), 1)
        finally:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker


async def test_a_lease_held_by_a_live_candidate_is_not_taken(kube: Kube, namespace: str) -> None:
    await kube.create(
        LEASES,
        {
            "metadata": {"name": "test-lease", "namespace": namespace},
            "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600},
        },
    )
    one = elector(kube, namespace, "one")
    async with running(one):
        await eventually(lambda: one.observed_holder == "someone-else", "a read of the lease")
        assert not one.is_leader
        assert await holder(kube, namespace) == "someone-else"


async def test_lease_expiry_is_judged_on_the_local_clock_whatever_the_holders_clock_says(
    kube: Kube, namespace: str
) -> None:
    # The holder's node clock runs an hour behind (its renewTime looks long expired) but it
    # keeps renewing: the lease is live. Then it stops, with a renewTime an hour in the future:
    # the lease is dead after one lease duration of no change, as this candidate measures it.
    def stamp(offset: float) -> str:
        moment = datetime.now(UTC) + timedelta(seconds=offset)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    spec = {"holderIdentity": "skewed", "leaseDurationSeconds": 1, "renewTime": stamp(-3600)}
    await kube.create(
        LEASES, {"metadata": {"name": "test-lease", "namespace": namespace}, "spec": spec}
    )
    one = elector(kube, namespace, "one")
    async with running(one):
        for _ in range(20):  # two seconds of renewals from the slow clock
            lease = await kube.get(LEASES, "test-lease", namespace)
            lease["spec"]["renewTime"] = stamp(-3600)
            await kube.replace(LEASES, lease)
            await asyncio.sleep(0.1)  # the holder renews ten times per lease duration
            assert not one.is_leader
        lease = await kube.get(LEASES, "test-lease", namespace)
        lease["spec"]["renewTime"] = stamp(3600)
        await kube.replace(LEASES, lease)
        await asyncio.wait_for(one.wait_until_leading(), 1 + 2 * RETRY + 2)
        assert await holder(kube, namespace) == "one"


@pytest.mark.parametrize(
    ("lease", "renew", "retry"), [(10, 10, 2), (15, 10, 9), (15, 10, 0), (5, 10, 2)]
)
def test_timings_out_of_proportion_are_refused(lease: float, renew: float, retry: float) -> None:
    with pytest.raises(ConfigError, match="lease duration > renew deadline"):
        LeaderElector(
            Kube(None),  # type: ignore[arg-type]
            LeaseSettings(
                namespace="ns",
                name="x",
                identity="me",
                lease_duration=lease,
                renew_deadline=renew,
                retry_period=retry,
            ),
        )
