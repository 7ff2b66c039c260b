"""The manager: one place that wires caches, controllers, periodic tasks, leader election and
the probe/metrics servers, and runs them in a stated order.

Start order, and why:
1. Probe and metrics servers first: liveness answers while the caches fill, and ``/readyz``
   says what it is waiting for instead of refusing connections.
2. Informer caches, then wait until every one has listed once: reconcilers read the cache,
   and a reconcile against an empty cache would "create" objects that already exist.
3. Periodic tasks that are not leader-only.
4. Leader election (when enabled). Caches run on every replica so a new leader starts warm.
5. Only while leading: the controllers' queue workers and the leader-only periodic tasks.
   Each term starts with every cached object queued (level-based: nothing is lost between
   terms). A lost lease cancels them at once; the replica then campaigns again.

Shutdown (``stop()``, wired to SIGTERM by the CLI) runs in reverse: the queues stop handing
out keys, in-flight reconciles and periodic runs get ``graceful_shutdown_timeout`` to finish
(cut short if the lease is lost meanwhile), the lease is released so a
successor takes over at once, then caches and servers stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from controller.runtime.controller import (
    Controller,
    Mapper,
    mapping_handler,
    owner_mapper,
    work,
)
from controller.runtime.metrics import RuntimeMetrics
from controller.runtime.queue import WorkQueue
from controller.settings import RuntimeSettings
from controller.types import Obj, ObjectKey, ObjectReader, Reconciler
from wspin.core.kinds import Resource
from wspin.core.logs import fields
from wspin.http.metrics import ServerCollector
from wspin.http.probes import Readiness, metrics_routes, probe_routes, process_registry
from wspin.http.server import HttpServer, serve
from wspin.kube.client import Kube
from wspin.kube.informer import EventType, Informer
from wspin.kube.leader import LeaderElector

log = logging.getLogger("controller.manager")

Periodic = Callable[[], Awaitable[None]]
Runnable = Callable[[asyncio.Event], Awaitable[None]]
"""A long-lived task: runs until the event it is given is set, then returns."""


@dataclass
class _PeriodicTask:
    name: str
    interval: float
    fn: Periodic
    leader_only: bool
    run_at_start: bool


@dataclass
class _RunnableTask:
    name: str
    run: Runnable
    leader_only: bool


@dataclass
class _Term:
    """The leader-only work of one leadership term."""

    stop: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class Manager:
    """Runs controllers over shared informer caches, only while holding the leader lease."""

    def __init__(
        self,
        kube: Kube,
        settings: RuntimeSettings,
        *,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.registry = registry if registry is not None else process_registry()
        """The process's one metrics registry; every part registers its metrics here."""
        self.metrics = RuntimeMetrics(self.registry)
        self.readiness = Readiness()
        self.health_port: int | None = None
        """The bound probe port once running (differs from the settings when 0 was asked)."""
        self.metrics_port: int | None = None
        self._servers: dict[str, HttpServer] = {}
        self.registry.register(ServerCollector(self._servers))
        self._informers: dict[tuple[Resource, str | None, str | None], Informer] = {}
        self._informer_tasks: list[asyncio.Task[None]] = []
        self._controllers: list[Controller] = []
        self._periodics: list[_PeriodicTask] = []
        self._runnables: list[_RunnableTask] = []
        self._cleanups: list[Callable[[], Awaitable[None]]] = []
        self._stopping = asyncio.Event()
        self._running = False
        self._failure: BaseException | None = None
        election = settings.leader_election
        self.elector = LeaderElector(kube, election) if election.enabled else None
        self._leader_gauge = self.metrics.leader.labels(
            election.name, election.identity if election.enabled else "leader-election-disabled"
        )
        self._leader_gauge.set(0)
        self._leading = asyncio.Event()
        self.readiness.add("caches", self._caches_problem)

    # -- registration ------------------------------------------------------------------------

    def cache(
        self, resource: Resource, *, namespace: str | None = None, labels: str | None = None
    ) -> Informer:
        """The shared informer for ``resource`` in ``namespace`` (None: all) and ``labels``;
        created on first use, the same object afterwards."""
        scope = (resource, namespace, labels)
        informer = self._informers.get(scope)
        if informer is None:
            informer = Informer(self.kube, resource, namespace=namespace, labels=labels)
            self._informers[scope] = informer
            if self._running:
                self._informer_tasks.append(asyncio.create_task(informer.run()))
        return informer

    def add_controller(
        self,
        reconciler: Reconciler,
        *,
        for_: Resource,
        owns: Sequence[Resource | tuple[Resource, str]] = (),
        watches: Sequence[tuple[Resource, Mapper]] = (),
    ) -> ObjectReader:
        """Reconcile ``for_`` objects; changes to ``owns`` objects queue their controller
        owner, and changes to ``watches`` objects queue what the mapper returns. Returns the
        primary cache.

        An ``owns`` entry may be ``(resource, label_selector)``: only matching objects are
        cached, so a controller of workspace pods does not hold every pod in the cluster.
        """
        primary = self.cache(for_)
        controller = Controller(reconciler, primary, self._new_queue(reconciler.name))
        self.metrics.init_controller(reconciler.name, for_.kind)
        self._controllers.append(controller)

        def on_primary(_: EventType, obj: Obj, old: Obj | None) -> None:
            controller.queue.add(ObjectKey.of(obj))

        primary.add_handler(on_primary)
        for owned in owns:
            resource, labels = owned if isinstance(owned, tuple) else (owned, None)
            by_owner = owner_mapper(for_)
            self.cache(resource, labels=labels).add_handler(mapping_handler(controller, by_owner))
        for watched, mapper in watches:
            self.cache(watched).add_handler(mapping_handler(controller, mapper))
        return primary

    def add_periodic(
        self,
        name: str,
        interval_seconds: float,
        fn: Periodic,
        *,
        leader_only: bool = True,
        run_at_start: bool = True,
    ) -> None:
        """Run ``fn`` every ``interval_seconds`` (after the caches synced); leader-only tasks
        run only while leading. A failure is logged and the next run happens on schedule."""
        if interval_seconds <= 0:
            raise ValueError(f"periodic task {name!r} needs a positive interval")
        self._periodics.append(_PeriodicTask(name, interval_seconds, fn, leader_only, run_at_start))

    def add_runnable(self, name: str, run: Runnable, *, leader_only: bool = True) -> None:
        """Run ``run(stop)`` after the caches synced (leader-only: for each leadership term);
        it must return soon after ``stop`` is set. A failure is logged; it is not restarted
        within the term."""
        self._runnables.append(_RunnableTask(name, run, leader_only))

    def requeue(self, controller: str) -> Callable[[ObjectKey], None]:
        """A function that queues a key for the named controller now (dropped while not
        leading): for parts that learn of a change no watch reports."""

        def add(key: ObjectKey) -> None:
            for registered in self._controllers:
                if registered.name == controller:
                    registered.queue.add(key)

        return add

    def add_cleanup(self, close: Callable[[], Awaitable[None]]) -> None:
        """Run ``close`` on shutdown, after leader-only work has stopped and before the caches
        stop (for resources such as pooled HTTP sessions)."""
        self._cleanups.append(close)

    # -- state -------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    def queue_of(self, name: str) -> WorkQueue:
        """The current work queue of the controller named ``name`` (a new one each term)."""
        for controller in self._controllers:
            if controller.reconciler.name == name:
                return controller.queue
        raise KeyError(name)

    def stop(self) -> None:
        """Begin a graceful shutdown (safe to call from a signal handler)."""
        self._stopping.set()

    def _caches_problem(self) -> str | None:
        waiting = [inf.name for inf in self._informers.values() if not inf.has_synced]
        return f"waiting for caches to sync: {', '.join(waiting)}" if waiting else None

    def _new_queue(self, name: str) -> WorkQueue:
        gauge = self.metrics.queue_depth.labels(name)
        return WorkQueue(name, on_depth=gauge.set)

    # -- running -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until ``stop()``; see the module docstring for the order."""
        self._running = True
        self._failure = None
        try:
            await self._run()
        finally:
            self._running = False
        if self._failure is not None:
            raise self._failure

    async def _run(self) -> None:
        async with contextlib.AsyncExitStack() as stack:
            # 1. Probe and metrics servers.
            await self._start_servers(stack)
            # 2. Caches, stopped last (registered first on the exit stack).
            stack.push_async_callback(self._stop_informers)
            for close in self._cleanups:
                stack.push_async_callback(close)
            for informer in self._informers.values():
                self._informer_tasks.append(asyncio.create_task(informer.run()))
            if not await self._until_stopping(self._wait_synced()):
                return
            # 3. Periodic tasks for every replica.
            everywhere = _Term()
            for task in self._periodics:
                if not task.leader_only:
                    everywhere.tasks.append(asyncio.create_task(self._periodic(task, everywhere)))
            for runnable in self._runnables:
                if not runnable.leader_only:
                    everywhere.tasks.append(
                        asyncio.create_task(_run_until_stopped(runnable, everywhere))
                    )
            stack.push_async_callback(self._stop_tasks, everywhere, graceful=True)
            # 4. Leader election; the lease is released on the way out.
            if self.elector is not None:
                elector = self.elector
                campaign = asyncio.create_task(elector.run())
                campaign.add_done_callback(self._campaign_ended)
                stack.push_async_callback(self._resign, campaign)
            # 5. Leader-only work, term after term.
            await self._lead()

    async def _lead(self) -> None:
        while not self._stopping.is_set():
            if self.elector is not None and not await self._until_stopping(
                self.elector.wait_until_leading()
            ):
                return
            term = self._begin_term()
            lost = self.elector.lost.wait() if self.elector is not None else asyncio.Event().wait()
            if await self._until_stopping(lost):
                log.warning("leadership lost: stopping leader-only work at once")
                await self._end_term(term, graceful=False)
                continue
            await self._end_term(term, graceful=True)

    def _begin_term(self) -> _Term:
        self._leading.set()
        self._leader_gauge.set(1)
        term = _Term()
        workers = self.settings.max_concurrent_reconciles
        for controller in self._controllers:
            controller.queue.shut_down()
            controller.queue = self._new_queue(controller.reconciler.name)
            for obj in controller.primary.list():  # level-based: a new term sees everything
                controller.queue.add(ObjectKey.of(obj))
            for _ in range(workers):
                term.tasks.append(
                    asyncio.create_task(work(controller, controller.queue, self.metrics))
                )
        for task in self._periodics:
            if task.leader_only:
                term.tasks.append(asyncio.create_task(self._periodic(task, term)))
        for runnable in self._runnables:
            if runnable.leader_only:
                term.tasks.append(asyncio.create_task(_run_until_stopped(runnable, term)))
        log.info(
            "started leader-only work",
            extra=fields(controllers=len(self._controllers), workers_each=workers),
        )
        return term

    async def _end_term(self, term: _Term, *, graceful: bool) -> None:
        self._leading.clear()
        self._leader_gauge.set(0)
        for controller in self._controllers:
            controller.queue.shut_down()  # workers finish their key, then exit
        # The grace is a leader's: losing the lease during it cuts it short.
        lost = self.elector.lost if self.elector is not None else None
        await self._stop_tasks(term, graceful=graceful, abort=lost)

    async def _stop_tasks(
        self, term: _Term, *, graceful: bool, abort: asyncio.Event | None = None
    ) -> None:
        """Let ``term``'s tasks finish what they are doing (within the grace, and until
        ``abort`` is set) or cancel."""
        term.stop.set()
        if graceful and term.tasks and not (abort is not None and abort.is_set()):
            grace = self.settings.graceful_shutdown_timeout
            finished = asyncio.ensure_future(asyncio.wait(term.tasks))
            aborted = asyncio.ensure_future(abort.wait() if abort else asyncio.Event().wait())
            await asyncio.wait(
                {finished, aborted}, timeout=grace, return_when=asyncio.FIRST_COMPLETED
            )
            await _cancel([finished, aborted])
            pending = [task for task in term.tasks if not task.done()]
            if pending:
                log.warning(
                    "leadership lost during the shutdown grace; cancelling in-flight work"
                    if aborted.done() and not aborted.cancelled()
                    else "shutdown grace period passed; cancelling in-flight work",
                    extra=fields(tasks=len(pending)),
                )
        await _cancel(term.tasks)

    def _campaign_ended(self, campaign: asyncio.Task[None]) -> None:
        """The campaign only ends by cancellation; anything else would leave this replica a
        silent non-leader forever, so it stops the manager and ``run()`` raises it."""
        if campaign.cancelled() or campaign.exception() is None:
            return
        self._failure = campaign.exception()
        log.error("leader election failed; stopping", exc_info=self._failure)
        self.stop()

    async def _resign(self, campaign: asyncio.Task[None]) -> None:
        await _cancel([campaign])
        if self.elector is not None:
            await self.elector.release()

    async def _periodic(self, task: _PeriodicTask, term: _Term) -> None:
        first = task.run_at_start
        while not term.stop.is_set():
            if not first:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(term.stop.wait(), task.interval)
                if term.stop.is_set():
                    return
            first = False
            try:
                await task.fn()
            except Exception:
                log.exception("periodic task failed", extra=fields(task=task.name))

    async def _wait_synced(self) -> None:
        for informer in list(self._informers.values()):
            await informer.wait_synced()
        log.info("caches synced", extra=fields(caches=len(self._informers)))

    async def _until_stopping(self, awaitable: Awaitable[object]) -> bool:
        """Await ``awaitable`` unless ``stop()`` comes first; True when it completed."""
        work = asyncio.ensure_future(awaitable)
        stopping = asyncio.ensure_future(self._stopping.wait())
        await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
        done = work.done()
        await _cancel([work, stopping])
        if done:
            work.result()
        return done and not self._stopping.is_set()

    async def _stop_informers(self) -> None:
        await _cancel(self._informer_tasks)
        self._informer_tasks.clear()

    async def _start_servers(self, stack: contextlib.AsyncExitStack) -> None:
        runtime = self.settings
        host = runtime.bind_host or ""  # "" = every interface
        health = await serve(probe_routes(self.readiness), host, runtime.health_port, log=log)
        stack.push_async_callback(health.shutdown)
        self.health_port = health.port
        self._servers["health"] = health
        metrics = await serve(metrics_routes(self.registry), host, runtime.metrics_port, log=log)
        stack.push_async_callback(metrics.shutdown)
        self.metrics_port = metrics.port
        self._servers["metrics"] = metrics
        log.info(
            "serving probes and metrics",
            extra=fields(health_port=self.health_port, metrics_port=self.metrics_port),
        )


async def _run_until_stopped(runnable: _RunnableTask, term: _Term) -> None:
    try:
        await runnable.run(term.stop)
    except Exception:
        log.exception("background task failed", extra=fields(task=runnable.name))


async def _cancel(tasks: Iterable[asyncio.Future[Any]]) -> None:
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    for task in pending:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            log.error("background task failed", exc_info=task.exception())
