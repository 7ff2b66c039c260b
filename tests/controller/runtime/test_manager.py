"""The manager: caches → controllers, outcomes → queue decisions, leader-only work, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.runtime.manager import Manager
from controller.settings import LeaderElectionSettings, RuntimeSettings
from controller.types import Obj, ObjectKey, Requeue
from tests.kubeapi import KubeServer
from tests.support.waiting import eventually
from wspin.core.errors import TerminalError, TransientError
from wspin.core.kinds import CONFIGMAPS, LEASES, SECRETS
from wspin.kube.client import Kube

Outcome = Callable[[ObjectKey, int], Awaitable[Requeue | None]]


class Recorder:
    """A reconciler that records calls and answers with ``outcome(key, call_number)``."""

    def __init__(self, outcome: Outcome | None = None, name: str = "recorder") -> None:
        self.name = name
        self.calls: Counter[ObjectKey] = Counter()
        self.active: set[ObjectKey] = set()
        self.overlap = False
        self.peak = 0
        self.outcome = outcome

    async def reconcile(self, key: ObjectKey) -> Requeue | None:
        if key in self.active:
            self.overlap = True
        self.active.add(key)
        self.peak = max(self.peak, len(self.active))
        self.calls[key] += 1
        try:
            if self.outcome is not None:
                return await self.outcome(key, self.calls[key])
            return None
        finally:
            self.active.discard(key)


def settings_for(
    namespace: str, *, election: bool = False, identity: str = "me", workers: int = 4
) -> RuntimeSettings:
    return RuntimeSettings(
        health_port=0,
        metrics_port=0,
        bind_host="127.0.0.1",
        max_concurrent_reconciles=workers,
        graceful_shutdown_timeout=5,
        leader_election=LeaderElectionSettings(
            enabled=election,
            namespace=namespace,
            identity=identity,
            lease_duration=1.5,
            renew_deadline=1.0,
            retry_period=0.2,
        ),
    )


@contextlib.asynccontextmanager
async def running(manager: Manager) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(manager.run())
    try:
        await eventually(lambda: manager.health_port is not None or task.done())
        yield task
    finally:
        manager.stop()
        await asyncio.wait_for(task, 10)


def settled(manager: Manager, recorder: Recorder, cm: ObjectKey) -> bool:
    """``cm`` is not waiting, in flight or due after a delay: without a new event, no
    reconcile of it follows."""
    return not manager.queue_of(recorder.name).holds(cm)


def key(namespace: str, name: str) -> ObjectKey:
    return ObjectKey(namespace, name)


async def make_cm(kube: Kube, namespace: str, name: str) -> Obj:
    return await kube.create(CONFIGMAPS, {"metadata": {"name": name}}, namespace)


async def test_every_existing_and_new_object_is_reconciled(kube: Kube, namespace: str) -> None:
    await make_cm(kube, namespace, "before")
    manager = Manager(kube, settings_for(namespace))
    recorder = Recorder()
    manager.add_controller(recorder, for_=CONFIGMAPS)
    async with running(manager):
        await eventually(lambda: recorder.calls[key(namespace, "before")] >= 1)
        await make_cm(kube, namespace, "after")
        await eventually(lambda: recorder.calls[key(namespace, "after")] >= 1)
        assert manager.is_leader, "without leader election the process always leads"


async def test_a_change_to_an_owned_object_reconciles_its_controller_owner(
    kube: Kube, namespace: str
) -> None:
    owner = await make_cm(kube, namespace, "owner")
    manager = Manager(kube, settings_for(namespace))
    recorder = Recorder()
    manager.add_controller(recorder, for_=CONFIGMAPS, owns=[SECRETS])
    async with running(manager):
        await eventually(lambda: recorder.calls[key(namespace, "owner")] == 1)
        ref = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner",
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
        await kube.create(
            SECRETS, {"metadata": {"name": "child", "ownerReferences": [ref]}}, namespace
        )
        await eventually(lambda: recorder.calls[key(namespace, "owner")] == 2)


async def test_a_watched_object_reconciles_what_its_mapper_returns(
    kube: Kube, namespace: str
) -> None:
    await make_cm(kube, namespace, "target")
    manager = Manager(kube, settings_for(namespace))
    recorder = Recorder()

    def mapper(obj: Obj) -> list[ObjectKey]:
        # The cache is cluster-wide: on a shared API server, other tests' Secrets (created,
        # or deleted with their namespaces) come by too, and must not count here.
        if obj["metadata"].get("namespace") != namespace:
            return []
        return [ObjectKey(namespace, "target")]

    manager.add_controller(recorder, for_=CONFIGMAPS, watches=[(SECRETS, mapper)])
    async with running(manager):
        await eventually(lambda: recorder.calls[key(namespace, "target")] == 1)
        await kube.create(SECRETS, {"metadata": {"name": "anything"}}, namespace)
        await eventually(lambda: recorder.calls[key(namespace, "target")] == 2)


async def test_requeue_after_brings_the_key_back_without_an_event(
    kube: Kube, namespace: str
) -> None:
    async def again(_: ObjectKey, n: int) -> Requeue | None:
        return Requeue(after=0.05) if n < 3 else None

    await make_cm(kube, namespace, "a")
    manager = Manager(kube, settings_for(namespace))
    recorder = Recorder(again)
    manager.add_controller(recorder, for_=CONFIGMAPS)
    async with running(manager):
        await eventually(
            lambda: (
                recorder.calls[key(namespace, "a")] == 3
                and settled(manager, recorder, key(namespace, "a"))
            )
        )
        assert recorder.calls[key(namespace, "a")] == 3  # nothing queued, nothing due: done


async def test_errors_are_retried_with_backoff_until_success(kube: Kube, namespace: str) -> None:
    async def flaky(_: ObjectKey, n: int) -> Requeue | None:
        if n < 4:
            raise RuntimeError("API hiccup")
        return None

    await make_cm(kube, namespace, "a")
    manager = Manager(kube, settings_for(namespace))
    recorder = Recorder(flaky)
    manager.add_controller(recorder, for_=CONFIGMAPS)
    async with running(manager):
        # 5 ms, 10 ms, 20 ms of backoff between the four calls
        await eventually(
            lambda: (
                recorder.calls[key(namespace, "a")] == 4
                and settled(manager, recorder, key(namespace, "a"))
            )
        )
        assert recorder.calls[key(namespace, "a")] == 4


async def test_a_transient_error_delay_overrides_the_backoff(kube: Kube, namespace: str) -> None:
    async def later(_: ObjectKey, n: int) -> Requeue | None:
        if n == 1:
            raise TransientError("router busy", delay=30)
        return None

    await make_cm(kube, namespace, "a")
    manager = Manager(kube, settings_for(namespace))
    recorder = Recorder(later)
    manager.add_controller(recorder, for_=CONFIGMAPS)
    async with running(manager):
        await eventually(lambda: manager.queue_of(recorder.name).delay_of(key(namespace, "a")))
        # Due in the error's 30 s, not the 5 ms the backoff would have chosen.
        delay = manager.queue_of(recorder.name).delay_of(key(namespace, "a"))
        assert delay is not None and 25 < delay <= 30
        assert recorder.calls[key(namespace, "a")] == 1


async def test_a_terminal_error_is_not_retried(kube: Kube, namespace: str) -> None:
    async def hopeless(_: ObjectKey, n: int) -> Requeue | None:
        raise TerminalError("spec can never work")

    await make_cm(kube, namespace, "a")
    manager = Manager(kube, settings_for(namespace))
    recorder = Recorder(hopeless)
    manager.add_controller(recorder, for_=CONFIGMAPS)
    async with running(manager):
        await eventually(
            lambda: (
                recorder.calls[key(namespace, "a")] == 1
                and settled(manager, recorder, key(namespace, "a"))
            )
        )
        assert recorder.calls[key(namespace, "a")] == 1  # nothing queued, nothing due
        # a new event still reconciles it
        await kube.patch(CONFIGMAPS, "a", {"data": {"x": "1"}}, namespace)
        await eventually(lambda: recorder.calls[key(namespace, "a")] == 2)


async def test_workers_run_in_parallel_up_to_the_limit_and_never_on_the_same_key(
    kube: Kube, namespace: str
) -> None:
    gate = asyncio.Event()

    async def slow(_: ObjectKey, n: int) -> Requeue | None:
        await gate.wait()
        return None

    for i in range(6):
        await make_cm(kube, namespace, f"cm{i}")
    manager = Manager(kube, settings_for(namespace, workers=3))
    recorder = Recorder(slow)
    manager.add_controller(recorder, for_=CONFIGMAPS)
    async with running(manager):
        await eventually(lambda: recorder.peak == 3)
        for i in range(6):  # events for in-flight keys must wait for their worker
            await kube.patch(CONFIGMAPS, f"cm{i}", {"data": {"x": "1"}}, namespace)
        await asyncio.sleep(0.1)
        assert recorder.peak == 3
        gate.set()
        await eventually(
            lambda: all(recorder.calls[key(namespace, f"cm{i}")] >= 1 for i in range(6))
        )
    assert not recorder.overlap


async def test_periodic_tasks_run_at_start_and_on_their_interval(
    kube: Kube, namespace: str
) -> None:
    runs: Counter[str] = Counter()

    def counting(name: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            runs[name] += 1
            if name == "failing":
                raise RuntimeError("sweep failed")

        return run

    manager = Manager(kube, settings_for(namespace))
    manager.add_periodic("fast", 0.05, counting("fast"))
    manager.add_periodic("late", 60, counting("late"), run_at_start=False)
    manager.add_periodic("failing", 0.05, counting("failing"), leader_only=False)
    async with running(manager):
        await eventually(lambda: runs["fast"] >= 3 and runs["failing"] >= 3)
        assert runs["late"] == 0


async def test_a_non_leader_caches_but_neither_reconciles_nor_runs_leader_only_tasks(
    kube: Kube, namespace: str
) -> None:
    await kube.create(
        LEASES,
        {
            "metadata": {"name": "wspin-controller", "namespace": namespace},
            "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600},
        },
    )
    await make_cm(kube, namespace, "a")
    manager = Manager(kube, settings_for(namespace, election=True))
    recorder = Recorder()
    everywhere: list[int] = []
    leader_only: list[int] = []

    async def mark_everywhere() -> None:
        everywhere.append(1)

    async def mark_leader() -> None:
        leader_only.append(1)

    manager.add_controller(recorder, for_=CONFIGMAPS)
    manager.add_periodic("everywhere", 60, mark_everywhere, leader_only=False)
    manager.add_periodic("leader", 60, mark_leader)
    async with running(manager):
        await eventually(lambda: len(everywhere) == 1)
        cache = manager.cache(CONFIGMAPS)
        assert cache.get(key(namespace, "a")) is not None
        assert manager.elector is not None
        await eventually(lambda: manager.elector.observed_holder == "someone-else")  # type: ignore[union-attr]
        assert not manager.is_leader
        assert recorder.calls == Counter()
        assert leader_only == []
        # the holder leaves: this replica takes over and reconciles what is in the cache
        lease = await kube.get(LEASES, "wspin-controller", namespace)
        lease["spec"]["holderIdentity"] = None
        await kube.replace(LEASES, lease)
        await eventually(lambda: recorder.calls[key(namespace, "a")] == 1)
        await eventually(lambda: leader_only == [1])


async def test_a_lost_lease_cancels_in_flight_reconciles_at_once(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    cancelled = asyncio.Event()
    started = asyncio.Event()

    async def stuck(_: ObjectKey, n: int) -> Requeue | None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return None

    await make_cm(kube, namespace, "a")
    manager = Manager(kube, settings_for(namespace, election=True))
    manager.add_controller(Recorder(stuck), for_=CONFIGMAPS)
    async with running(manager):
        await asyncio.wait_for(started.wait(), 5)
        kube_server.fail_next(503, path="/apis/coordination.k8s.io", count=10_000)
        await asyncio.wait_for(cancelled.wait(), 3)
        assert not manager.is_leader


async def test_stop_finishes_in_flight_reconciles_and_releases_the_lease(
    kube: Kube, namespace: str
) -> None:
    started, finished = asyncio.Event(), asyncio.Event()
    release = asyncio.Event()

    async def slow(_: ObjectKey, n: int) -> Requeue | None:
        started.set()
        await release.wait()
        finished.set()
        return None

    await make_cm(kube, namespace, "a")
    manager = Manager(kube, settings_for(namespace, election=True))
    manager.add_controller(Recorder(slow), for_=CONFIGMAPS)
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(started.wait(), 5)
    manager.stop()
    await asyncio.sleep(0.1)
    assert not task.done(), "must wait for the in-flight reconcile"
    release.set()
    await asyncio.wait_for(task, 5)
    assert finished.is_set()
    lease = await kube.get(LEASES, "wspin-controller", namespace)
    assert not lease["spec"].get("holderIdentity")


async def test_a_lease_lost_during_the_shutdown_grace_cancels_in_flight_reconciles_at_once(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    # The grace after SIGTERM is for a leader; once another replica may lead, finishing the
    # reconcile would be two leaders writing.
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def stuck(_: ObjectKey, n: int) -> Requeue | None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return None

    await make_cm(kube, namespace, "a")
    settings = settings_for(namespace, election=True)
    settings = replace(settings, graceful_shutdown_timeout=30)
    manager = Manager(kube, settings)
    manager.add_controller(Recorder(stuck), for_=CONFIGMAPS)
    task = asyncio.create_task(manager.run())
    try:
        await asyncio.wait_for(started.wait(), 5)
        manager.stop()
        await asyncio.sleep(0.1)
        assert not cancelled.is_set(), "a leader's in-flight reconcile gets the grace"
        kube_server.fail_next(503, path="/apis/coordination.k8s.io", count=10_000)
        await asyncio.wait_for(cancelled.wait(), 3)  # the renew deadline, not the 30 s grace
        await asyncio.wait_for(task, 5)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_readiness_waits_for_the_caches_and_metrics_are_exposed(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    async def fails_once(_: ObjectKey, n: int) -> Requeue | None:
        if n == 1:
            raise RuntimeError("first try fails")
        return None

    await make_cm(kube, namespace, "a")
    kube_server.fail_next(500, method="GET", path="/api/v1/configmaps", count=2)
    manager = Manager(kube, settings_for(namespace))
    recorder = Recorder(fails_once)
    manager.add_controller(recorder, for_=CONFIGMAPS)
    async with running(manager), aiohttp.ClientSession() as http:
        base = f"http://127.0.0.1:{manager.health_port}"
        async with http.get(f"{base}/readyz") as response:
            assert response.status == 503
            assert "waiting for caches to sync" in await response.text()
        async with http.get(f"{base}/healthz") as response:
            assert response.status == 200
        await eventually(lambda: recorder.calls[key(namespace, "a")] == 2)
        async with http.get(f"{base}/readyz") as response:
            assert response.status == 200
        async with http.get(f"http://127.0.0.1:{manager.metrics_port}/metrics") as response:
            text = await response.text()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    ctl = ("controller", "recorder")
    assert samples[("wspin_controller_reconcile_total", (ctl, ("result", "success")))] == 1
    assert samples[("wspin_controller_reconcile_total", (ctl, ("result", "error")))] == 1
    assert samples[("wspin_controller_reconcile_errors_total", (ctl,))] == 1
    assert samples[("wspin_controller_reconcile_time_seconds_count", (ctl,))] == 2
    assert samples[("wspin_workqueue_depth", (("name", "recorder"),))] == 0
    leader = [v for (name, _), v in samples.items() if name == "wspin_controller_leader"]
    assert leader == [1]
    # Both side ports run the one HTTP server, and report their connections: the scrape's own.
    assert samples[("wspin_http_connections", (("port", "metrics"),))] == 1
    assert ("wspin_http_connections", (("port", "health"),)) in samples


@pytest.mark.parametrize("interval", [0, -1])
def test_a_periodic_task_needs_a_positive_interval(interval: float, kube: Kube) -> None:
    manager = Manager(kube, RuntimeSettings())

    async def noop() -> None:
        return None

    with pytest.raises(ValueError, match="positive interval"):
        manager.add_periodic("x", interval, noop)


async def test_a_failed_leader_campaign_stops_the_manager_loudly(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    # The real API server validates leaseTransitions as int32; the test server does not,
    # which lets this provoke an unexpected error inside the campaign.
    await kube.create(
        LEASES,
        {
            "metadata": {"name": "wspin-controller", "namespace": namespace},
            "spec": {"holderIdentity": "", "leaseTransitions": "many"},
        },
    )
    manager = Manager(kube, settings_for(namespace, election=True))
    with pytest.raises(ValueError, match="many"):
        await asyncio.wait_for(manager.run(), 10)


async def test_cleanups_run_once_on_shutdown_after_leader_work_stopped(
    kube: Kube, namespace: str
) -> None:
    order: list[str] = []
    manager = Manager(kube, settings_for(namespace))

    async def periodic() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            order.append("leader work stopped")

    async def close() -> None:
        order.append("cleanup")

    manager.add_periodic("forever", 60, periodic)
    manager.add_cleanup(close)
    async with running(manager):
        await eventually(lambda: manager.is_leader)
        assert order == []
    assert order == ["leader work stopped", "cleanup"]


async def test_owned_objects_outside_the_label_selector_are_neither_cached_nor_mapped(
    kube: Kube, namespace: str
) -> None:
    owner = await make_cm(kube, namespace, "owner")
    manager = Manager(kube, settings_for(namespace))
    recorder = Recorder()
    manager.add_controller(recorder, for_=CONFIGMAPS, owns=[(SECRETS, "owned=yes")])
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    async with running(manager):
        await eventually(lambda: recorder.calls[key(namespace, "owner")] == 1)
        await kube.create(
            SECRETS, {"metadata": {"name": "stranger", "ownerReferences": [ref]}}, namespace
        )
        await kube.create(
            SECRETS,
            {"metadata": {"name": "child", "labels": {"owned": "yes"}, "ownerReferences": [ref]}},
            namespace,
        )
        await eventually(lambda: recorder.calls[key(namespace, "owner")] == 2)
        secrets = manager.cache(SECRETS, labels="owned=yes")
        assert [s["metadata"]["name"] for s in secrets.list(namespace)] == ["child"]
        assert recorder.calls[key(namespace, "owner")] == 2


async def test_a_runnable_runs_for_the_term_and_ends_when_told(kube: Kube, namespace: str) -> None:
    started, stopped = asyncio.Event(), asyncio.Event()
    runs: list[str] = []

    async def runnable(stop: asyncio.Event) -> None:
        runs.append("leader")
        started.set()
        await stop.wait()
        stopped.set()

    async def failing(stop: asyncio.Event) -> None:
        runs.append("everywhere")
        raise RuntimeError("broken runnable")

    manager = Manager(kube, settings_for(namespace))
    manager.add_runnable("scheduler", runnable)
    manager.add_runnable("failing", failing, leader_only=False)
    async with running(manager):
        await asyncio.wait_for(started.wait(), 5)
        await eventually(lambda: "everywhere" in runs)
        assert not stopped.is_set()
    # The manager's stop set the runnable's stop: it returned on its own, not cancelled.
    assert stopped.is_set()
    assert sorted(runs) == ["everywhere", "leader"]


async def test_requeue_queues_a_key_for_the_named_controller_while_leading(
    kube: Kube, namespace: str
) -> None:
    manager = Manager(kube, settings_for(namespace))
    recorder, other = Recorder(), Recorder(name="other")
    manager.add_controller(recorder, for_=CONFIGMAPS)
    manager.add_controller(other, for_=SECRETS)
    queue_it = manager.requeue("recorder")
    async with running(manager):
        await eventually(lambda: manager.is_leader)
        queue_it(key(namespace, "not-in-any-cache"))
        await eventually(lambda: recorder.calls[key(namespace, "not-in-any-cache")] == 1)
    assert other.calls[key(namespace, "not-in-any-cache")] == 0
