"""Lease-based leader election (``coordination.k8s.io/v1``), client-go's algorithm in asyncio.

Both processes use it: the controller so that one replica reconciles and sweeps orphans, the
webhook's certificate authority so that one replica rotates the CA.

The algorithm (client-go ``leaderelection``): a candidate reads the Lease; it may take it when
nobody holds it, when it already holds it, or when the record has not changed for the lease
duration as measured on the candidate's own clock (remote timestamps are never compared with
local time, so clock skew between nodes cannot hand out two leases). Every write carries the
resourceVersion it read, so two candidates racing for an expired lease cannot both win: the
API server answers the second with 409.

A leader renews every ``retry_period``; when it has not renewed for ``renew_deadline`` (which is
shorter than ``lease_duration``) it stops leading at once, before any other candidate can see
the lease as expired. That ordering is what makes "exactly one leader" hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from wspin.core.clock import format_micro_time, utc_now
from wspin.core.errors import AlreadyExists, ConfigError, Conflict, KubeAPIError
from wspin.core.kinds import LEASES
from wspin.core.logs import fields
from wspin.core.namespaces import DEFAULT_NAMESPACE
from wspin.core.objects import Obj
from wspin.kube.client import Kube

log = logging.getLogger("wspin.leader")

Listener = Callable[[bool], None]

# client-go's JitterFactor: retries spread over [retry, 1.2 * retry] so candidates do not
# hit the API server in lock step.
_JITTER = 0.2


@dataclass(frozen=True)
class LeaseSettings:
    """Which Lease a candidate campaigns for, as whom, and how fast (client-go's timings)."""

    namespace: str = DEFAULT_NAMESPACE
    """Namespace of the Lease: the process's own."""
    name: str = "wspin-controller"
    """Name of the Lease object."""
    identity: str = ""
    """This candidate's holder identity: pod name (hostname) plus a random suffix, so a
    restarted container never inherits its predecessor's term."""
    lease_duration: float = 15.0
    """Seconds a non-leader waits after the last renewal before taking over (client-go: 15)."""
    renew_deadline: float = 10.0
    """Seconds the leader keeps trying to renew before stepping down (client-go: 10); shorter
    than the lease duration so the old leader stops before a new one can start."""
    retry_period: float = 2.0
    """Seconds between acquire/renew attempts (client-go: 2)."""

    def timing_problem(self) -> str | None:
        """Why the timings cannot give one leader at a time, or None: the lease must outlast
        the renew deadline, which must outlast a jittered retry."""
        if self.lease_duration > self.renew_deadline > self.retry_period * (1 + _JITTER) > 0:
            return None
        return (
            "leader election timings out of proportion: lease duration > renew deadline > "
            f"1.2 x retry period > 0 does not hold (lease {self.lease_duration:g}s, renew "
            f"{self.renew_deadline:g}s, retry {self.retry_period:g}s)"
        )


class LeaderElector:
    """One candidate for the Lease ``namespace/name``.

    ``run()`` campaigns forever: acquire, renew, and on loss campaign again. ``is_leader``,
    ``wait_until_leading()`` and the ``lost`` event tell leader-only work when to start and
    stop; ``run_while_leading(work)`` does both for one coroutine. ``release()`` hands the lease
    over at once on a clean shutdown instead of making the successor wait for expiry.
    """

    def __init__(self, kube: Kube, lease: LeaseSettings) -> None:
        problem = lease.timing_problem()
        if problem:
            raise ConfigError(
                problem, "use the defaults 15 s / 10 s / 2 s or keep their proportions"
            )
        if not lease.identity:
            raise ConfigError("leader election identity is empty", "pass a unique identity")
        self.kube = kube
        self.lease = lease
        self.lost = asyncio.Event()
        """Set when leadership is lost (after having been held); cleared on re-acquiring."""
        self._leading = asyncio.Event()
        self._listeners: list[Listener] = []
        self._observed_record: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._held_by_other = False

    # -- what callers read -------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    @property
    def observed_holder(self) -> str | None:
        """The holder the last read of the Lease showed ("" for none); None before the first
        read. What ``wspin check`` and the tests see of another replica's term."""
        if self._observed_record is None:
            return None
        return str(self._observed_record[0] or "")

    async def wait_until_leading(self) -> None:
        await self._leading.wait()

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(True)`` on becoming leader and ``listener(False)`` on losing it."""
        self._listeners.append(listener)

    async def run_while_leading(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work()`` each time leadership is won and cancel it the moment it is lost.

        Never returns until cancelled; ``run()`` must be running alongside.
        """
        while True:
            await self.wait_until_leading()
            task = asyncio.ensure_future(work())
            lost = asyncio.ensure_future(self.lost.wait())
            try:
                await asyncio.wait({task, lost}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pending in (task, lost):
                    pending.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await pending
            if task.done() and not task.cancelled() and task.exception() is not None:
                log.error(
                    "leader-only work failed",
                    exc_info=task.exception(),
                    extra=fields(lease=self.lease.name),
                )
            if self.is_leader:  # the work ended by itself: wait for the next term
                await self.lost.wait()

    # -- the campaign ------------------------------------------------------------------------

    async def run(self) -> None:
        """Acquire, renew until the deadline passes, lose, campaign again; until cancelled."""
        try:
            while True:
                acquired_at = await self._acquire()
                self._set_leading(True)
                await self._renew(acquired_at)
                self._set_leading(False)
        finally:
            if self.is_leader:
                self._set_leading(False)

    async def release(self) -> bool:
        """Give the lease up (empty holder) so a successor takes over without waiting.

        Call after ``run()`` has been cancelled. Best effort: a failure is logged and the
        lease then simply expires. Returns True when the lease was released.
        """
        self._set_leading(False)
        try:
            async with asyncio.timeout(self.lease.renew_deadline):
                return await self._release()
        except TimeoutError:
            log.warning(
                "releasing the leader lease timed out; it will expire instead",
                extra=fields(lease=self.lease.name),
            )
            return False

    async def _release(self) -> bool:
        try:
            lease = await self.kube.get_or_none(LEASES, self.lease.name, self.lease.namespace)
            if lease is None or lease.get("spec", {}).get("holderIdentity") != self.lease.identity:
                return False
            now = format_micro_time(utc_now())
            lease["spec"] = {
                **lease.get("spec", {}),
                "holderIdentity": None,
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
            }
            await self.kube.replace(LEASES, lease)
        except KubeAPIError as err:
            log.warning(
                "could not release the leader lease; it will expire instead",
                extra=fields(lease=self.lease.name, error=str(err)),
            )
            return False
        log.info("released the leader lease", extra=fields(lease=self.lease.name))
        return True

    async def _acquire(self) -> float:
        """Campaign until the lease is ours; returns when the winning write was sent."""
        log.info(
            "waiting to acquire the leader lease",
            extra=fields(
                lease=f"{self.lease.namespace}/{self.lease.name}", identity=self.lease.identity
            ),
        )
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            if await self._attempt(self.lease.renew_deadline):
                return started
            await asyncio.sleep(self.lease.retry_period * (1 + random.random() * _JITTER))  # noqa: S311

    async def _renew(self, renewed_at: float) -> None:
        """Renew every retry period; return (leadership lost) once the renew deadline passes
        without a successful renewal, or at once when another candidate holds the lease.

        ``renewed_at`` is when the last successful write was *sent*: a follower may have seen
        that write long before a slow answer reached us, and it counts the lease duration from
        then, so the deadline must count from then too. Waits never overshoot the deadline.
        """
        loop = asyncio.get_running_loop()
        while True:
            remaining = self.lease.renew_deadline - (loop.time() - renewed_at)
            await asyncio.sleep(max(0.0, min(self.lease.retry_period, remaining)))
            started = loop.time()
            remaining = self.lease.renew_deadline - (started - renewed_at)
            ok = remaining > 0 and await self._attempt(remaining)
            if ok:
                renewed_at = started
                continue
            if self._held_by_other or loop.time() - renewed_at >= self.lease.renew_deadline:
                log.warning(
                    "lost the leader lease",
                    extra=fields(
                        lease=self.lease.name,
                        reason="held by another candidate"
                        if self._held_by_other
                        else "renew deadline passed",
                    ),
                )
                return

    async def _attempt(self, budget: float) -> bool:
        """One acquire-or-renew that gives up after ``budget`` seconds (a hung API call counts as a
        failed attempt, never as a stalled campaign)."""
        try:
            async with asyncio.timeout(budget):
                return await self._try_acquire_or_renew()
        except TimeoutError:
            log.warning("leader lease request timed out", extra=fields(lease=self.lease.name))
            return False

    async def _try_acquire_or_renew(self) -> bool:
        loop = asyncio.get_running_loop()
        now = format_micro_time(utc_now())
        self._held_by_other = False
        spec: Obj = {
            "holderIdentity": self.lease.identity,
            "leaseDurationSeconds": max(1, math.ceil(self.lease.lease_duration)),
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        }
        try:
            lease = await self.kube.get_or_none(LEASES, self.lease.name, self.lease.namespace)
            if lease is None:
                created = await self.kube.create(
                    LEASES,
                    {
                        "metadata": {"name": self.lease.name, "namespace": self.lease.namespace},
                        "spec": spec,
                    },
                )
                self._observe(created, loop.time())
                return True
            current = lease.get("spec") or {}
            self._observe(lease, loop.time())
            holder = current.get("holderIdentity") or ""
            duration = float(current.get("leaseDurationSeconds") or self.lease.lease_duration)
            if (
                holder
                and holder != self.lease.identity
                and loop.time() < self._observed_at + duration
            ):
                self._held_by_other = True
                return False
            if holder == self.lease.identity:
                spec["acquireTime"] = current.get("acquireTime") or now
                spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0)
            else:
                spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0) + 1
            lease["spec"] = {**current, **spec}
            updated = await self.kube.replace(LEASES, lease)
        except (AlreadyExists, Conflict):
            return False  # another candidate wrote first; read again next round
        except KubeAPIError as err:
            log.warning(
                "leader lease request failed", extra=fields(lease=self.lease.name, error=str(err))
            )
            return False
        self._observe(updated, loop.time())
        return True

    def _observe(self, lease: Obj, at: float) -> None:
        """Remember when the lease record last changed, on our own clock."""
        spec = lease.get("spec") or {}
        record = tuple(
            spec.get(key)
            for key in ("holderIdentity", "renewTime", "acquireTime", "leaseTransitions")
        )
        if record != self._observed_record:
            self._observed_record = record
            self._observed_at = at

    def _set_leading(self, leading: bool) -> None:
        if leading == self.is_leader:
            return
        if leading:
            self.lost.clear()
            self._leading.set()
            log.info("acquired the leader lease", extra=fields(lease=self.lease.name))
        else:
            self._leading.clear()
            self.lost.set()
        for listener in self._listeners:
            try:
                listener(leading)
            except Exception:
                log.exception("leader listener failed", extra=fields(lease=self.lease.name))
