"""Metering for billing: how long each Workspace was Active, and the disk, memory and CPU it
used meanwhile, as counters per Workspace and per user (the names and labels LLMSafeSpaces'
billing dashboards read).

Per Workspace, labels ``workspace_namespace``, ``workspace_id`` (the Workspace's name) and
``user_id`` (``fleet.owner_user_id``); the namespace keeps same-named Workspaces of two
namespaces apart:

- ``llmsafespaces_workspace_active_seconds_total{…,runtime,security_level}``;
- ``llmsafespaces_workspace_disk_used_bytes_seconds_total`` and
  ``llmsafespaces_workspace_memory_used_bytes_seconds_total``: bytes used times seconds;
- ``llmsafespaces_workspace_cpu_milliseconds_total``: CPU time of the pod's agent and its
  children.

Per user (``user_id``): ``llmsafespaces_user_active_seconds_total{user_id,runtime,
security_level}``, ``llmsafespaces_user_disk_bytes_seconds_total``,
``llmsafespaces_user_memory_bytes_seconds_total`` and ``llmsafespaces_user_cpu_milliseconds_total``.

**Wall-clock, not passes.** The agent scheduler calls ``observe`` at every observation of an
Active Workspace's agent with the seconds since the previous one (however many reconciles ran
in between), and the bytes its latest deep status reported; the byte-seconds are those bytes
held over that time. CPU is the growth of agentd's cumulative counter between two deep status
reads of the same pod (a new pod, or an agentd that started again, counts from 0). CPU a pod
used before the current leadership term began (``new_term``) is another leader's to count: a
pod that started earlier is first read as a baseline, never counted again.

**Bounded.** Owner ids are whatever a Workspace says, so the series are capped: at most
``max_workspaces`` Workspaces and ``max_users`` users have series of their own; the rest are
counted under ``workspace_id``/``user_id`` ``_overflow`` (a Workspace past its cap in one
series per runtime and security level with ``user_id`` ``_overflow`` too; a user past theirs
with ``user_id`` ``_overflow``), so totals stay right and the series stop growing. A
deleted Workspace's series go with it (``forget``), and a user's with the user's last
Workspace, freeing their places. A user id is cut to 128 characters. Only the leader meters,
so only its counters grow; sum them over the controller's replicas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from prometheus_client import CollectorRegistry, Counter

from controller.types import Obj, ObjectKey
from wspin.core import fleet

OVERFLOW: Final = "_overflow"
"""The ``workspace_id`` and ``user_id`` of what is counted past the caps."""
MAX_WORKSPACES: Final = 10_000
"""Workspaces with series of their own (the controller's cache is sized for 10,000)."""
MAX_USERS: Final = 10_000
"""Users with series of their own."""
MAX_USER_ID: Final = 128
"""Characters of a user id kept in a label."""

WorkspaceLabels = tuple[str, str, str]
"""(workspace_namespace, workspace_id, user_id) as labelled."""
_OVERFLOW_WORKSPACE: Final[WorkspaceLabels] = ("", OVERFLOW, OVERFLOW)
_WORKSPACE: Final = ["workspace_namespace", "workspace_id", "user_id"]
_LEVELS: Final = ["runtime", "security_level"]


@dataclass(frozen=True)
class Account:
    """What a Workspace's use is counted under."""

    namespace: str
    workspace: str
    user: str
    runtime: str
    security_level: str

    @classmethod
    def of(cls, ws: Obj) -> Account:
        meta = ws.get("metadata") or {}
        return cls(
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            fleet.owner_user_id(ws)[:MAX_USER_ID],
            fleet.runtime_label(ws),
            fleet.security_level_label(ws),
        )


@dataclass
class _Meter:
    """One Workspace's place in the counters."""

    account: Account
    workspace: WorkspaceLabels
    user: str
    """``user_id`` of the per-user series."""
    pod_uid: str = ""
    cpu_micros: int = 0

    @property
    def levels(self) -> tuple[str, str]:
        return (self.account.runtime, self.account.security_level)


@dataclass
class _User:
    workspaces: int = 0
    levels: set[tuple[str, str]] = field(default_factory=set)
    """(runtime, security level) of the user's active-seconds series."""


class Metering:
    """The counters above, registered once per process, and the places handed out."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        started: datetime | None = None,
        max_workspaces: int = MAX_WORKSPACES,
        max_users: int = MAX_USERS,
    ) -> None:
        self.started = started
        """When the current leadership term began: CPU a pod used before is another leader's
        to count (None: count everything)."""
        self.max_workspaces = max_workspaces
        self.max_users = max_users
        once = " Metered from the wall-clock time between observations of its agent."
        self.active = Counter(
            "llmsafespaces_workspace_active_seconds_total",
            "Seconds the Workspace was Active." + once,
            [*_WORKSPACE, *_LEVELS],
            registry=registry,
        )
        self.disk = Counter(
            "llmsafespaces_workspace_disk_used_bytes_seconds_total",
            "Bytes used on the workspace volume times the seconds they were held." + once,
            _WORKSPACE,
            registry=registry,
        )
        self.memory = Counter(
            "llmsafespaces_workspace_memory_used_bytes_seconds_total",
            "Bytes of memory the workspace pod used times the seconds they were held." + once,
            _WORKSPACE,
            registry=registry,
        )
        self.cpu = Counter(
            "llmsafespaces_workspace_cpu_milliseconds_total",
            "CPU milliseconds the workspace pod's agent and its children used.",
            _WORKSPACE,
            registry=registry,
        )
        self.user_active = Counter(
            "llmsafespaces_user_active_seconds_total",
            "Seconds the user's Workspaces were Active, summed." + once,
            ["user_id", *_LEVELS],
            registry=registry,
        )
        self.user_disk = Counter(
            "llmsafespaces_user_disk_bytes_seconds_total",
            "Bytes used on the user's workspace volumes times the seconds they were held.",
            ["user_id"],
            registry=registry,
        )
        self.user_memory = Counter(
            "llmsafespaces_user_memory_bytes_seconds_total",
            "Bytes of memory the user's workspace pods used times the seconds they were held.",
            ["user_id"],
            registry=registry,
        )
        self.user_cpu = Counter(
            "llmsafespaces_user_cpu_milliseconds_total",
            "CPU milliseconds the user's workspace pods used.",
            ["user_id"],
            registry=registry,
        )
        self._meters: dict[ObjectKey, _Meter] = {}
        self._own = 0
        """Workspaces with series of their own (not ``_overflow``)."""
        self._users: dict[str, _User] = {}
        """Users with series of their own."""

    def track(self, key: ObjectKey, account: Account) -> None:
        """Give the Workspace its place (its series exist from now on, at 0)."""
        self._meter(key, account)

    def observe(
        self,
        key: ObjectKey,
        account: Account,
        seconds: float,
        *,
        disk_bytes: int | None = None,
        memory_bytes: int | None = None,
    ) -> None:
        """``seconds`` of Active time, with ``disk_bytes`` and ``memory_bytes`` held over
        them (None: not known)."""
        meter = self._meter(key, account)
        if seconds <= 0:
            return
        self.active.labels(*meter.workspace, *meter.levels).inc(seconds)
        self.user_active.labels(meter.user, *meter.levels).inc(seconds)
        if disk_bytes is not None and disk_bytes > 0:
            self.disk.labels(*meter.workspace).inc(disk_bytes * seconds)
            self.user_disk.labels(meter.user).inc(disk_bytes * seconds)
        if memory_bytes is not None and memory_bytes > 0:
            self.memory.labels(*meter.workspace).inc(memory_bytes * seconds)
            self.user_memory.labels(meter.user).inc(memory_bytes * seconds)

    def observe_cpu(
        self,
        key: ObjectKey,
        account: Account,
        pod_uid: str,
        micros: int,
        *,
        pod_started: datetime | None = None,
    ) -> None:
        """agentd's cumulative CPU counter ``micros``, read from the pod ``pod_uid`` (which
        started at ``pod_started``)."""
        meter = self._meter(key, account)
        if pod_uid != meter.pod_uid:
            ran_before = (
                self.started is not None
                and not meter.pod_uid
                and (pod_started is None or pod_started < self.started)
            )
            used = 0 if ran_before else micros
        else:
            # Less than before: agentd started again within the pod, from 0.
            used = micros - meter.cpu_micros if micros >= meter.cpu_micros else micros
        meter.pod_uid, meter.cpu_micros = pod_uid, micros
        if used > 0:
            self.cpu.labels(*meter.workspace).inc(used / 1000)
            self.user_cpu.labels(meter.user).inc(used / 1000)

    def new_term(self, now: datetime) -> None:
        """This process leads (again) from ``now``: what the pods used meanwhile was another
        leader's to count, so every pod's CPU is read afresh as a baseline."""
        self.started = now
        for meter in self._meters.values():
            meter.pod_uid, meter.cpu_micros = "", 0

    def forget(self, key: ObjectKey) -> None:
        """The Workspace is gone: its series go, and its user's with the user's last one."""
        meter = self._meters.pop(key, None)
        if meter is not None:
            self._release(meter)

    def workspace_event(self, kind: str, ws: Obj, _: Obj | None) -> None:
        """An informer handler over the Workspace cache: a deleted Workspace is forgotten."""
        if kind == "DELETED":
            self.forget(ObjectKey.of(ws))

    def __len__(self) -> int:
        return len(self._meters)

    # -- places ------------------------------------------------------------------------------

    def _meter(self, key: ObjectKey, account: Account) -> _Meter:
        meter = self._meters.get(key)
        if meter is not None and meter.account == account:
            return meter
        if meter is not None and _who(meter.account) == _who(account):
            # Only the runtime or the security level changed: only the active series moves.
            if meter.workspace != _OVERFLOW_WORKSPACE:
                self.active.remove(*meter.workspace, *meter.levels)
            meter.account = account
        else:
            if meter is not None:
                self._release(meter)
            meter = self._meters[key] = self._place(account)
        self._create(meter)
        return meter

    def _place(self, account: Account) -> _Meter:
        user = account.user
        if user == OVERFLOW or (user not in self._users and len(self._users) >= self.max_users):
            user = OVERFLOW  # an owner named like the bucket is counted in it
        else:
            self._users.setdefault(user, _User()).workspaces += 1
        workspace = _OVERFLOW_WORKSPACE
        if self._own < self.max_workspaces:
            workspace = (account.namespace, account.workspace, user)
            self._own += 1
        return _Meter(account, workspace, user)

    def _create(self, meter: _Meter) -> None:
        """Every series of the meter, at 0 until counted (so its first increase is seen)."""
        self.active.labels(*meter.workspace, *meter.levels)
        self.user_active.labels(meter.user, *meter.levels)
        if meter.user != OVERFLOW:
            self._users[meter.user].levels.add(meter.levels)
        for counter in (self.disk, self.memory, self.cpu):
            counter.labels(*meter.workspace)
        for counter in (self.user_disk, self.user_memory, self.user_cpu):
            counter.labels(meter.user)

    def _release(self, meter: _Meter) -> None:
        if meter.workspace != _OVERFLOW_WORKSPACE:
            self._own -= 1
            self.active.remove(*meter.workspace, *meter.levels)
            for counter in (self.disk, self.memory, self.cpu):
                counter.remove(*meter.workspace)
        user = self._users.get(meter.user)
        if meter.user == OVERFLOW or user is None:
            return
        user.workspaces -= 1
        if user.workspaces > 0:
            return
        del self._users[meter.user]
        for levels in user.levels:
            self.user_active.remove(meter.user, *levels)
        for counter in (self.user_disk, self.user_memory, self.user_cpu):
            counter.remove(meter.user)


def _who(account: Account) -> tuple[str, str, str]:
    return (account.namespace, account.workspace, account.user)
