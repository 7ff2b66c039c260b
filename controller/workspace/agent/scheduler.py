"""One scheduler reads agentd in every Active workspace pod: liveness and deep status on
deadlines, bounded across the fleet, and a reconcile only when what it read changes the
Workspace's status.

- **Targets** are registered by the Workspace reconciler (``track``) on each Active pass, keyed
  by the Workspace's namespace and uid and pinned to its pod (uid and IP): a new pod is a new
  target. Before every read the caches are asked again whether the Workspace is still Active on
  that very pod; a target that is not is dropped, so nothing is ever read from a pod that went
  away (or whose IP another pod took), and no explicit unregistering is needed.
- **Deadlines on the runtime's work queue**: each target has a next liveness and a next deep
  status deadline, each a delayed add of its key (the target and what to read) to one
  ``WorkQueue`` of the controller runtime, which never hands a key out twice at once and
  holds at most one pending add per key. The deadline the target holds decides: a key that
  comes out before it (the deadline moved later since) is put back until it. First deadlines
  are spread over the interval by a hash of the Workspace's uid (and wait
  ``Timing.startup_grace`` after the pod became Active), later ones keep that phase; a read
  that ran late is re-spread instead of piling up.
- **Bounded**: the runtime's pool (``pool.serve``) runs at most ``concurrency`` reads at once,
  each bounded in time (``Timing``) and size (``agent_report``).
- **Results**: kept per target as an ``AgentView``. After a read, the Workspace is queued for
  a reconcile (``notify``) only if writing the view would change its status
  (``agent_status.changes_status``), so a fleet in a steady state makes no reconcile and no
  write at all; the reconciler writes status, once per pass, as for any other change.
- **Drains** (``drain``): while the reconciler holds a recycle back for busy sessions, the
  target's deep status is read every ``Timing.drain_poll``, and the Workspace is queued when
  a read could change the drain's verdict (first read, sessions changed or ended, read failed).

Runs only while the process leads (``run(stop)``, a leader-only runnable); its targets go with
the term.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from prometheus_client import CollectorRegistry

from controller.runtime.pool import serve
from controller.runtime.queue import Timers, WorkQueue
from controller.settings import AgentSettings
from controller.types import Obj, ObjectKey, ObjectReader
from controller.workspace.agent.answers import (
    MAX_HEALTH_BODY,
    MAX_STATUS_BODY,
    Unreadable,
    parse_health,
    parse_status,
)
from controller.workspace.agent.client import (
    HEALTH_PATH,
    STATUS_PATH,
    AgentClient,
    Answer,
    Unanswered,
)
from controller.workspace.agent.metering import Account, Metering
from controller.workspace.agent.metrics import AgentMetrics
from controller.workspace.agent.report import changes_status
from controller.workspace.agent.view import COUNTED, AgentView, Liveness
from wspin.core.clock import Clock, format_time, parse_time, utc_now
from wspin.core.contract import AGENTD, MAIN_CONTAINER
from wspin.core.workspace import WorkspaceStatus

log = logging.getLogger("controller.workspace.agent")


@dataclass(frozen=True)
class Timing:
    """The fixed times of agent reads, in seconds."""

    health: float = 5.0
    """A liveness read's bound (agentd answers in milliseconds)."""
    status: float = 30.0
    """A deep status read's bound."""
    drain: float = 10.0
    """A deep status read's bound during a drain."""
    drain_poll: float = 10.0
    """Time between deep status reads during a drain."""
    startup_grace: float = 30.0
    """Time after a pod became Active before its agent is first read (agentd finishes
    connecting its providers meanwhile)."""


Kind = Literal["health", "status"]
Ident = tuple[str, str]
"""(namespace, Workspace uid)."""
Read = tuple[Ident, Kind]
"""A key on the work queue: one kind of read of one target."""
KINDS: tuple[Kind, ...] = ("health", "status")


def phase_of(ident: str) -> float:
    """A fixed fraction in [0, 1) per Workspace: where in each interval its reads fall."""
    digest = hashlib.blake2b(ident.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def scrape_address(pod: Obj | None) -> str | None:
    """The pod's IP when its agent can be read: Running, not being deleted, with an IP and the
    agentd delivery marker on the workspace container (without it there is no agentd)."""
    if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return None
    status = pod.get("status") or {}
    ip = status.get("podIP")
    if status.get("phase") != "Running" or not isinstance(ip, str) or not ip:
        return None
    for container in (pod.get("spec") or {}).get("containers") or []:
        if not isinstance(container, dict) or container.get("name") != MAIN_CONTAINER:
            continue
        marker = None
        for env in container.get("env") or []:
            if isinstance(env, dict) and env.get("name") == AGENTD.marker_env:
                marker = env.get("value")  # the last duplicate wins, as in the kubelet
        return ip if marker == "1" else None
    return None


@dataclass
class _Target:
    key: ObjectKey
    pod_name: str
    pod_uid: str
    ip: str
    token: str = field(repr=False)
    phase: float
    due: dict[str, float]
    view: AgentView = field(default_factory=AgentView)
    account: Account = field(default_factory=lambda: Account("", "", "", "", ""))
    """What its Active time and usage are metered under."""
    pod_started: datetime | None = None
    busy: dict[str, int] | None = None
    drain_epoch: int = 0
    observed: float = 0.0
    drain_news: bool = False
    """The latest deep status read may change a drain's verdict."""
    checked: tuple[str, int, AgentView] | None = None
    """(Workspace version, generation, view) of the last look at whether a reconcile is due."""


class AgentScheduler:
    """Reads agentd in every Active workspace pod; see the module docstring."""

    def __init__(
        self,
        settings: AgentSettings,
        *,
        workspaces: ObjectReader,
        pods: ObjectReader,
        metrics: AgentMetrics,
        metering: Metering | None = None,
        notify: Callable[[ObjectKey], None] = lambda key: None,
        clock: Clock = utc_now,
        waker: Timers | None = None,
        client: AgentClient | None = None,
        timing: Timing = Timing(),
    ) -> None:
        self.settings = settings
        self.workspaces = workspaces
        self.pods = pods
        self.metrics = metrics
        self.metering = metering if metering is not None else Metering(CollectorRegistry())
        """Active time, disk, memory and CPU per Workspace and per user (None: a private
        registry, for tests)."""
        self.notify = notify
        """Queues a Workspace for a reconcile (the manager's queue, set at wiring)."""
        self.clock = clock
        self.waker = waker
        """Where deadlines wait (None: the running event loop)."""
        self.client = client or AgentClient(settings.port)
        self.timing = timing
        self._targets: dict[Ident, _Target] = {}
        self._queue = self._new_queue()
        self._epoch = 0
        metrics.targets.set_function(lambda: len(self._targets))

    # -- what the reconciler calls ---------------------------------------------------------

    def track(self, ws: Obj, pod: Obj, token: str) -> AgentView | None:
        """Register (or refresh) the agent of ``ws``'s Active pod; its view so far, or None
        when the pod has no agent to read."""
        ident = _ident(ws)
        ip = scrape_address(pod)
        pod_meta = pod.get("metadata") or {}
        target = self._targets.get(ident)
        if ip is None:
            self._drop(ident)
            return None
        if target is not None and (target.pod_uid, target.ip) != (pod_meta.get("uid"), ip):
            self._drop(ident)
            target = None
        status = WorkspaceStatus.of(ws.get("status"))
        if target is None:
            now = self._now()
            started = status.start_time
            waited = (self.clock() - started).total_seconds() if started else 0.0
            first = now + max(0.0, self.timing.startup_grace - waited)
            phase = phase_of(ident[1])
            failures = status.consecutive_health_failures
            target = _Target(
                key=ObjectKey.of(ws),
                pod_name=str(pod_meta.get("name") or ""),
                pod_uid=str(pod_meta.get("uid") or ""),
                ip=ip,
                token=token,
                phase=phase,
                due={},
                # A restarted controller continues the count the status recorded.
                view=AgentView(failures=failures if isinstance(failures, int) else 0),
                observed=now,
                pod_started=parse_time((pod.get("status") or {}).get("startTime")),
            )
            self._targets[ident] = target
            self._schedule(ident, "health", first + phase * self.settings.health_interval)
            self._schedule(ident, "status", first + phase * self.settings.status_interval)
        target.key, target.token = ObjectKey.of(ws), token
        target.account = Account.of(ws)
        self.metering.track(target.key, target.account)
        return target.view

    def view(self, ws: Obj) -> AgentView | None:
        """What is known of ``ws``'s agent (None: not tracked)."""
        target = self._targets.get(_ident(ws))
        return target.view if target is not None else None

    def drain(self, ws: Obj) -> int | None:
        """Read ``ws``'s deep status now and every ``Timing.drain_poll`` until ``end_drain``;
        the drain's epoch (reads from it on are fresh for the drain), or None when its agent
        is not tracked."""
        ident = _ident(ws)
        target = self._targets.get(ident)
        if target is None:
            return None
        if not target.drain_epoch:
            self._epoch += 1
            target.drain_epoch = self._epoch
            self._schedule(ident, "status", self._now())
        return target.drain_epoch

    def end_drain(self, ws: Obj) -> None:
        """Back to the usual deep status period (the recycle went ahead or is no longer due)."""
        ident = _ident(ws)
        target = self._targets.get(ident)
        if target is not None and target.drain_epoch:
            target.drain_epoch = 0
            self._schedule(ident, "status", self._later(target, "status"))

    def forget(self, ws: Obj) -> None:
        """Stop reading ``ws``'s agent (it left Active or is gone)."""
        self._drop(_ident(ws))

    def targets(self) -> list[tuple[ObjectKey, str, AgentView]]:
        """(Workspace, owner, view) of every tracked agent, for the usage metrics."""
        return [(t.key, t.account.user, t.view) for t in self._targets.values()]

    @property
    def in_flight(self) -> int:
        """Keys the work queue has handed out and not yet got back (reads running)."""
        return self._queue.in_flight

    def next_due(self) -> float | None:
        """The earliest deadline of a tracked target (None: nothing tracked); a look over
        every target, for tests and diagnostics."""
        return min((due for t in self._targets.values() for due in t.due.values()), default=None)

    # -- the reads ---------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Read agents as their deadlines come, until ``stop`` is set (one leadership term:
        its targets and queue go with it)."""
        self.metering.new_term(self.clock())
        try:
            await serve(self._queue, self._take, concurrency=self.settings.concurrency, stop=stop)
        finally:
            self._targets.clear()
            self._queue = self._new_queue()
            await self.client.close()

    async def _take(self, key: Read) -> None:
        """One key from the queue: its read if the target's deadline has come."""
        ident, kind = key
        target = self._targets.get(ident)
        due = target.due.get(kind) if target is not None else None
        if target is None or due is None:
            return  # dropped
        now = self._now()
        if due > now:
            self._queue.add_after(key, due - now)  # the deadline moved later meanwhile
            return
        self.metrics.lag.observe(now - due)
        self.metrics.in_flight.inc()
        try:
            await self._read(ident, target, kind)
        except Exception:
            log.exception("agent read failed")
        finally:
            self.metrics.in_flight.dec()

    async def _read(self, ident: Ident, target: _Target, kind: Kind) -> None:
        ws = self._current(ident, target)
        if ws is None:
            return
        if kind == "health":
            await self._read_health(target)
        else:
            await self._read_status(target)
        if self._targets.get(ident) is not target:
            return  # dropped while the read ran
        when = self._later(target, kind)
        if kind == "status" and target.drain_epoch != target.view.status_epoch:
            when = self._now()  # a drain began while this read ran: read again now
        self._schedule(ident, kind, when)
        if self._worth_a_reconcile(ws, target, kind):
            self.notify(target.key)

    def _current(self, ident: Ident, target: _Target) -> Obj | None:
        """The Workspace, if it is still Active on the target's pod; else drop the target."""
        ws = self.workspaces.get(target.key)
        pod = self.pods.get(ObjectKey(target.key.namespace, target.pod_name))
        meta = (ws or {}).get("metadata") or {}
        if (
            ws is None
            or meta.get("uid") != ident[1]
            or WorkspaceStatus.of(ws.get("status")).phase != "Active"
            or pod is None
            or (pod.get("metadata") or {}).get("uid") != target.pod_uid
            or scrape_address(pod) != target.ip
        ):
            self._drop(ident)
            return None
        return ws

    async def _read_health(self, target: _Target) -> None:
        self.metrics.checks.labels("healthz").inc()
        try:
            answer = await self.client.get(
                target.ip, HEALTH_PATH, seconds=self.timing.health, cap=MAX_HEALTH_BODY
            )
        except Unanswered as err:
            live = Liveness("unreachable", str(err))
        else:
            live = judge_health(answer)
        if live.verdict != "ok":
            self.metrics.check_failures.labels("healthz", live.verdict).inc()
        failures = target.view.failures + 1 if live.verdict in COUNTED else 0
        target.view = replace(target.view, liveness=live, failures=failures)
        self._meter(target)

    async def _read_status(self, target: _Target) -> None:
        self.metrics.checks.labels("statusz").inc()
        epoch = target.drain_epoch
        timeout = self.timing.drain if epoch else self.timing.status
        problem, outcome = "", ""
        try:
            answer = await self.client.get(
                target.ip, STATUS_PATH, seconds=timeout, cap=MAX_STATUS_BODY, bearer=target.token
            )
        except Unanswered as err:
            problem, outcome = str(err), "unreachable"
        else:
            status = None
            if answer.too_large:
                problem, outcome = f"statusz answer exceeds {MAX_STATUS_BODY} bytes", "unreadable"
            elif answer.status != 200:
                problem = f"statusz answered HTTP {answer.status}"
                outcome = "unhealthy" if answer.status >= 500 else "unreadable"
            else:
                try:
                    status = parse_status(answer.body)
                except Unreadable as err:
                    problem, outcome = str(err), "unreadable"
            if status is not None and not status.healthy:
                problem, outcome = "agentd reports itself unhealthy", "unhealthy"
            elif status is not None:
                view = target.view
                busy = status.busy()
                changed = target.busy is not None and busy != target.busy
                target.busy = busy
                # What a drain decides on: its first read, sessions that changed or ended.
                target.drain_news = view.status_epoch != epoch or changed or not busy
                target.view = replace(
                    view,
                    status=status,
                    status_problem="",
                    status_epoch=epoch,
                    busy_changes=view.busy_changes + (1 if changed else 0),
                )
                if status.cpu_usage_micros is not None:
                    self.metering.observe_cpu(
                        target.key,
                        target.account,
                        target.pod_uid,
                        status.cpu_usage_micros,
                        pod_started=target.pod_started,
                    )
                return
        self.metrics.check_failures.labels("statusz", outcome).inc()
        target.drain_news = True  # a drain fails open
        target.view = replace(target.view, status_problem=problem, status_epoch=epoch)

    def _worth_a_reconcile(self, ws: Obj, target: _Target, kind: Kind) -> bool:
        if kind == "status" and target.drain_epoch and target.drain_news:
            # During a drain, a read that may change its verdict: a fresh first read, a
            # failure (fail open), sessions that changed or ended. The stall bound is the
            # reconciler's own deadline.
            return True
        meta = ws.get("metadata") or {}
        generation = int(meta.get("generation") or 0)
        # The same answer about the same version of the Workspace: the same verdict (most
        # reads of a steady fleet end here, without building a status).
        seen = (str(meta.get("resourceVersion") or ""), generation, target.view)
        if seen == target.checked:
            return False
        target.checked = seen
        return changes_status(
            dict(ws.get("status") or {}), target.view, generation, format_time(self.clock())
        )

    # -- bookkeeping -------------------------------------------------------------------------

    def _later(self, target: _Target, kind: Kind) -> float:
        """The next deadline after a read: one interval on, in the target's phase; a read that
        ran late starts a new phase from now instead of queueing behind others."""
        if kind == "status" and target.drain_epoch:
            return self._now() + self.timing.drain_poll
        interval = (
            self.settings.health_interval if kind == "health" else self.settings.status_interval
        )
        now = self._now()
        due = target.due.get(kind, now) + interval
        return due if due > now else now + interval * (0.5 + target.phase / 2)

    def _now(self) -> float:
        return (self.waker or asyncio.get_running_loop()).time()

    def _new_queue(self) -> WorkQueue[Read]:
        return WorkQueue("agent-reads", timers=self.waker)

    def _schedule(self, ident: Ident, kind: Kind, when: float) -> None:
        """Set the target's deadline; its key comes out of the queue then (or earlier, for an
        earlier pending add, and goes back until the deadline)."""
        self._targets[ident].due[kind] = when
        self._queue.add_after((ident, kind), when - self._now())

    def _drop(self, ident: Ident) -> None:
        target = self._targets.pop(ident, None)
        if target is not None:
            for kind in KINDS:
                self._queue.cancel((ident, kind))
            self._meter(target)

    def _meter(self, target: _Target) -> None:
        """Active seconds since the previous observation of ``target`` (its registration, its
        last liveness read), with the disk and memory its latest deep status reported held
        over them. A target lives only within one leadership term, and is dropped by the
        first look that finds its Workspace no longer Active on that pod, so every gap is
        time the Workspace was Active, however late a read ran."""
        now = self._now()
        gap, target.observed = now - target.observed, now
        status = target.view.status
        self.metering.observe(
            target.key,
            target.account,
            gap,
            disk_bytes=status.disk.used if status is not None and status.disk else None,
            memory_bytes=status.memory.used if status is not None and status.memory else None,
        )


def judge_health(answer: Answer) -> Liveness:
    """The liveness verdict of a healthz answer (see ``agent_view``)."""
    if answer.too_large:
        return Liveness("unreadable", f"healthz answer exceeds {MAX_HEALTH_BODY} bytes")
    try:
        health = parse_health(answer.body)
    except Unreadable as err:
        if answer.status >= 500:
            return Liveness("unhealthy", f"healthz answered HTTP {answer.status}")
        detail = str(err) if answer.status == 200 else f"healthz answered HTTP {answer.status}"
        return Liveness("unreadable", detail)
    if health.healthy is False:
        return Liveness("unhealthy", f"healthz answered HTTP {answer.status}", health)
    if answer.status >= 500:
        return Liveness("unhealthy", f"healthz answered HTTP {answer.status}", health)
    if answer.status != 200:
        return Liveness("unreadable", f"healthz answered HTTP {answer.status}")
    if health.healthy is None:
        return Liveness("unreadable", "healthz answer has no boolean 'healthy'", health)
    return Liveness("ok", "", health)


def _ident(ws: Obj) -> Ident:
    meta = ws.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("uid") or ""))
