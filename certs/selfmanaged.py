"""The self-managed source: every replica serves the Secret's certificate; the Lease holder
also creates, renews and rotates it and patches the caBundle.

Each round reads the Secret, lets the leader drive it through the authority's steps
(``certs.authority``) one conditional write at a time, then serves whatever it now holds.
Polling is the whole mechanism: rounds run every ``refresh`` seconds, sooner when a step is
due or leadership is won, and the authority's ``propagation`` is sized to cover it.
Non-leaders never write the Secret, so replicas cannot race; even two leaders briefly
overlapping could not both write, because every write carries the resourceVersion it read.

Every replica also reports the leaf it serves (``certs.reports``): after loading a new one,
and on every round of a CA rotation whose entry is missing or stale. The leader finishes a
rotation only once every replica the Service routes to reports the new leaf.

Every replica reads the webhook configurations each round, too (``certs.trust``): it is ready
only while they carry the CA that signed the leaf it serves, and a replica without the Lease
fills configurations that carry no bundle at all (a re-install) from the published Secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from certs.authority import Plan, Policy, apply_step, awaiting_replicas, next_step
from certs.build import CertificateError, fingerprint
from certs.cabundle import Target, patch_ca_bundle
from certs.expiry import ExpiryReporter
from certs.metrics import CertificateMetrics
from certs.reports import Replicas, ServingReports, leaf_fingerprint
from certs.store import SecretStore, Stored
from certs.tls import ServesFromContext, ServingContext
from certs.trust import Trust
from certs.validity import Reason, UnusablePair
from wspin.core.backoff import Backoff
from wspin.core.clock import Clock, utc_now
from wspin.core.errors import Conflict, Forbidden, KubeAPIError, NotFound
from wspin.core.logs import fields

log = logging.getLogger("wspin.certs")

MAX_STEPS = 8
"""Steps the leader applies in one round; a fresh install needs three (create, publish,
wait), so hitting this means something rewrites the Secret behind our back."""
CONFLICT_BACKOFF = 0.1
"""Seconds before the second re-read after conflicting writes, doubling up to ``refresh``:
the first conflict is re-read at once, but something that keeps rewriting the Secret (a
GitOps tool reverting it, say) must not turn the leader into a tight GET/PUT loop."""
UNTRUSTED_RECHECK = 1.0
"""Seconds between rounds, at most, while the webhook configurations do not carry the CA of
the served certificate: readiness follows the leader's publication (or a follower's fill)
this soon, at two reads of the configurations a second."""


class Leadership(Protocol):
    """What the source needs of a Lease-based leader elector (``wspin.kube.leader``)."""

    @property
    def is_leader(self) -> bool: ...

    def add_listener(self, listener: Callable[[bool], None]) -> None: ...

    async def run(self) -> None: ...

    async def release(self) -> bool: ...


@dataclass(frozen=True)
class SelfManagedSettings:
    secret: str
    """Name of the Secret holding CA, bundle and serving certificate (in the own namespace)."""
    namespace: str
    policy: Policy
    webhooks: tuple[Target, ...] = ()
    """Configurations whose caBundle the leader keeps equal to the Secret's bundle."""
    refresh: float = 10.0
    """Seconds between rounds: how soon a replica serves a certificate another one wrote."""
    pod: str = ""
    """This replica's pod name: its key in the serving reports and its name in the
    Service's EndpointSlices (``--pod-name``, the chart's POD_NAME)."""


class SelfManagedSource(ServesFromContext):
    """A ``CertificateSource`` backed by the Secret, renewed by whichever replica leads."""

    def __init__(
        self,
        store: SecretStore,
        settings: SelfManagedSettings,
        leadership: Leadership,
        *,
        reports: ServingReports,
        metrics: CertificateMetrics,
        clock: Clock = utc_now,
    ) -> None:
        self.store = store
        self.settings = settings
        self.leadership = leadership
        self.reports = reports
        self._clock = clock
        self._serving = ServingContext()
        self.rounds = 0
        """Rounds ``run()`` has completed: what an observer waits on instead of time."""
        self._metrics = metrics
        self._expiry = ExpiryReporter(metrics.expiry)
        self._wake = asyncio.Event()
        self._due: datetime.datetime | None = None
        self._waiting_logged = False
        self._problems_logged: tuple[str, ...] = ()
        self._conflicts = 0
        self._rejected: tuple[bytes, str] | None = None
        self._reported: str | None = None
        self._hold_logged: str | None = None
        self._trust = Trust(store.kube, settings.webhooks)
        leadership.add_listener(lambda leading: self._wake.set() if leading else None)

    async def run(self) -> None:
        """Campaign for the Lease and run rounds until cancelled; then hand the Lease over.

        Never raises (the webhook runs this as a background task nobody awaits): an
        unexpected error is logged and the next round runs after ``refresh``.
        """
        campaign = asyncio.create_task(self.leadership.run(), name="certificate-lease")
        campaign.add_done_callback(_report_campaign_end)
        try:
            while True:
                # Cleared before the round, not after: leadership won while a round is
                # reading or loading must still cut the following wait short.
                self._wake.clear()
                try:
                    delay = await self.round()
                except Exception:
                    log.exception("certificate round failed", extra=fields(secret=self._ref()))
                    delay = self.settings.refresh
                self.rounds += 1
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
        finally:
            campaign.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await campaign
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await self.leadership.release()

    async def round(self) -> float:
        """Read, drive (leader only), serve; returns seconds until the next round."""
        self._due = None
        try:
            stored = await self.store.read()
            if stored.problems and stored.problems != self._problems_logged:
                self._problems_logged = stored.problems
                log.warning(
                    "certificate Secret has unusable parts",
                    extra=fields(secret=self._ref(), problems=list(stored.problems)),
                )
            if self.leadership.is_leader:
                stored = await self._drive(stored)
            else:
                self._note_hold(None)
            await self._serve(stored)
            if self._serving.pair is not None:
                leading = self.leadership.is_leader
                await self._trust.check(self._serving.pair.cert, stored, leading=leading)
            await self._report(stored)
            self._conflicts = 0
        except Conflict:
            # Someone wrote since we read: read again, at once the first time (no conflict
            # before it to back off from), then after a doubling wait.
            self._conflicts += 1
            return Backoff(CONFLICT_BACKOFF, self.settings.refresh).delay(self._conflicts - 1)
        except KubeAPIError as err:
            log.warning(
                "certificate Secret round failed; retrying",
                extra=fields(secret=self._ref(), error=str(err), fix=self._fix(err)),
            )
        return self._delay()

    async def _drive(self, stored: Stored) -> Stored:
        policy = self.settings.policy
        for _ in range(MAX_STEPS):
            if not self.leadership.is_leader:
                # Lost while this round awaited the API: a write would most likely fail
                # on its resourceVersion, but a caBundle patch from a stale read would not.
                return stored
            replicas = await self._replicas(stored)
            now = self._clock()
            plan = next_step(stored, now, policy, replicas)
            self._note_hold(plan)
            if plan.step == "wait":
                self._due = plan.wait_until
                await self._publish(stored)  # re-assert after e.g. a helm upgrade reset it
                return stored
            if plan.step == "publish" and not await self._publish(stored):
                return stored
            stored = await self.store.write(apply_step(plan.step, stored, now, policy))
            log.info(
                "certificate authority step",
                extra=fields(
                    secret=self._ref(),
                    step=plan.step,
                    reason=plan.reason,
                    ca=fingerprint(stored.ca.cert) if stored.ca else None,
                    serving=fingerprint(stored.serving.cert) if stored.serving else None,
                    bundle=[fingerprint(c) for c in stored.bundle],
                ),
            )
        log.warning(
            "certificate authority did not settle in one round",
            extra=fields(secret=self._ref(), steps=MAX_STEPS),
        )
        return stored

    async def _replicas(self, stored: Stored) -> Replicas | None:
        """The replicas' reports, read only while a rotation waits for them."""
        if not awaiting_replicas(stored):
            return None
        try:
            return await self.reports.replicas()
        except KubeAPIError as err:
            log.warning(
                "cannot read which replicas serve the new certificate; keeping the old CA",
                extra=fields(error=str(err), fix=self._reports_fix()),
            )
            return None

    def _note_hold(self, plan: Plan | None) -> None:
        """Metric and one log line per distinct hold when replicas are overdue."""
        held = plan is not None and plan.step == "wait" and plan.overdue
        self._metrics.rotation_held.set(1 if held else 0)
        self._metrics.rotation_lagging.set(len(plan.lagging) if plan is not None and held else 0)
        if plan is None or not held:
            self._hold_logged = None
            return
        if plan.reason != self._hold_logged:
            self._hold_logged = plan.reason
            log.warning(
                "old CA kept in the caBundle: replicas have not reported serving the new "
                "certificate in time",
                extra=fields(
                    secret=self._ref(),
                    reason=plan.reason,
                    lagging=list(plan.lagging),
                    service=self.reports.service,
                    fix="a lagging replica re-reads the Secret every round; check its logs, "
                    "or delete its pod so that a fresh one serves the new certificate",
                ),
            )

    async def _report(self, stored: Stored) -> None:
        """Publish the served leaf's fingerprint when it changed, and, during a CA
        rotation, whenever the record says otherwise (it may have been pruned or lost)."""
        pair = self._serving.pair
        if pair is None or not self.settings.pod:
            return
        fingerprint = leaf_fingerprint(pair.cert)
        rotating = len(stored.bundle) > 1
        try:
            if fingerprint == self._reported and (
                not rotating or await self.reports.reported(self.settings.pod) == fingerprint
            ):
                return
            await self.reports.publish(self.settings.pod, fingerprint, self._clock())
        except KubeAPIError as err:
            log.warning(
                "could not report the served certificate; retrying next round",
                extra=fields(pod=self.settings.pod, error=str(err), fix=self._reports_fix()),
            )
            return
        self._reported = fingerprint
        log.info(
            "reported the served certificate",
            extra=fields(pod=self.settings.pod, fingerprint=fingerprint[:16]),
        )

    def _reports_fix(self) -> str:
        return (
            f"grant the webhook's service account get and patch on configmaps "
            f"{self.settings.namespace}/{self.reports.configmap}, create on configmaps and "
            "list on endpointslices.discovery.k8s.io in its namespace (the chart does)"
        )

    async def _publish(self, stored: Stored) -> bool:
        """Patch the bundle into the configurations; False (logged) when that failed."""
        if not stored.bundle or not self.settings.webhooks:
            return True
        try:
            written = await patch_ca_bundle(
                self.store.kube, stored.bundle_pem, list(self.settings.webhooks)
            )
        except KubeAPIError as err:
            log.warning(
                "caBundle not patched; retrying next round",
                extra=fields(error=str(err), fix=self._fix(err)),
            )
            return False
        if written:
            log.info(
                "caBundle patched",
                extra=fields(
                    configurations=written, bundle=[fingerprint(c) for c in stored.bundle]
                ),
            )
        return True

    def trust_problem(self) -> str | None:
        """Why the API server cannot call this replica yet (``certs.trust``), or None."""
        return self._trust.problem()

    async def _serve(self, stored: Stored) -> None:
        now = self._clock()
        if stored.ca is not None:
            self._expiry.observe("ca", stored.ca.cert, now)
        serving = stored.serving
        if serving is None and stored.serving_rejected:
            self._reject(
                stored.serving_rejected,
                (stored.resource_version or "").encode(),
                "; ".join(stored.problems),
                None,
            )
            return
        if serving is None:
            if not self._waiting_logged and self._serving.pair is None:
                log.info(
                    "waiting for the Lease holder to create the certificate Secret",
                    extra=fields(secret=self._ref()),
                )
                self._waiting_logged = True
            return
        if not self._serving.serves(serving.cert_pem, serving.key_pem):
            try:
                await self._serving.load(serving.cert_pem, serving.key_pem, self._ref(), now)
            except CertificateError as err:
                reason = err.reason if isinstance(err, UnusablePair) else "unreadable"
                self._reject(reason, serving.cert_pem, str(err), fingerprint(serving.cert))
                return
            log.info(
                "serving certificate loaded",
                extra=fields(
                    secret=self._ref(),
                    fingerprint=fingerprint(serving.cert),
                    issuer=fingerprint(stored.ca.cert) if stored.ca else None,
                    notAfter=serving.not_after.isoformat(),
                ),
            )
        self._expiry.observe("serving", serving.cert, now)

    def _reject(self, reason: Reason, what: bytes, error: str, cert: str | None) -> None:
        """Keep the current certificate; count and log each rejected pair once (the Secret
        is re-read every round)."""
        if (what, reason) == self._rejected:
            return
        self._rejected = (what, reason)
        self._metrics.rejected.labels(reason=reason).inc()
        log.warning(
            "serving certificate from the Secret not loaded; still serving the previous one"
            if self._serving.pair is not None
            else "serving certificate from the Secret not loaded",
            extra=fields(secret=self._ref(), reason=reason, fingerprint=cert, error=error),
        )

    def _delay(self) -> float:
        delay = self.settings.refresh
        if self._trust.problem() is not None and self._serving.pair is not None:
            delay = min(delay, UNTRUSTED_RECHECK)
        if self._due is not None:
            until = (self._due - self._clock()).total_seconds()
            delay = min(delay, max(until, 0.0))
        return delay

    def _ref(self) -> str:
        return f"{self.settings.namespace}/{self.settings.secret}"

    def _fix(self, err: KubeAPIError) -> str:
        if isinstance(err, Forbidden):
            return (
                "grant the webhook's service account get, create and update on secrets "
                f"{self._ref()} and get and update on the webhook configurations"
            )
        if isinstance(err, NotFound):
            return (
                "check --secret, --mutating-webhook-name and --validating-webhook-name "
                "(Helm: the release's webhook configuration names)"
            )
        return "check the API server's availability"


def _report_campaign_end(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error(
            "leader election stopped; this replica will no longer renew certificates",
            exc_info=task.exception(),
        )
