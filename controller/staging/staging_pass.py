"""The per-workspace relay staging pass: provider keys sealed to the router, scoped tokens
handed to the workspace, revocation, conditions; run inside the Workspace reconcile.

Order: fetch the credentials, ensure the mint key, read the
public key (direct, never cached), work out the desired set and the bookkeeping, revoke what
is no longer bound, maybe escalate a rotation, seal what changed, mint or reuse tokens,
compute the revision, write the handoff, then the conditions, Events and the bookkeeping
(``status.relayStaging``).

Business failures (credential source down, public key unreadable, seal or mint failures)
become conditions and the reconcile succeeds: relay trouble must not block the rest of the
workspace. Infrastructure write failures are returned as errors (retry with backoff).
Nothing changed → zero writes: the handoff is compared byte for byte, the bookkeeping and
conditions are written only on change.

Every pass keeps its state in locals; the object holds only what is shared on purpose (the
clients, the credential cache, the process-wide redactor), so passes for different
workspaces run in parallel safely.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from controller.staging import conditions as cond
from controller.staging import withdrawal
from controller.staging.arming import RelayStagingConfig
from controller.staging.clients import CredentialSource, InternalCallError, RouterClient
from controller.staging.desired import (
    SEALED_GENERATION,
    STAGED_FOR,
    STAGED_PROVIDERS,
    STAGED_REVISION,
    Bookkeeping,
    DesiredProvider,
    desired_set,
    has_legacy_annotations,
    needs_seal,
    parse_providers,
    recorded,
    render_providers,
    sealed_generation,
    with_owner_mark,
    write_bookkeeping,
)
from controller.staging.envelopes import (
    EnvelopeError,
    Sealer,
    revoke,
    seal,
    sweep_unbound,
)
from controller.staging.escalation import Escalation, Result, escalate, lineage_intact
from controller.staging.handoff import HandoffWriter, renew, revision
from controller.staging.ownership import WorkspaceNames, staged_for
from controller.staging.schedule import DEFAULT_STALENESS_BOUND, next_pass_in, staleness_tick
from controller.staging.secrets import (
    RelaySecretError,
    RelaySecrets,
    ensure_mint_key,
    read_hpke_pub,
)
from controller.toolkit.conditions import find_condition
from controller.toolkit.events import EventRecorder
from controller.types import Obj, StagingReport
from wspin.core.clock import Clock, utc_now
from wspin.core.errors import KubeAPIError, TransientError
from wspin.core.kinds import WORKSPACES
from wspin.core.logs import fields
from wspin.core.owners import record_of
from wspin.core.redact import Redactor
from wspin.core.workspace import WorkspaceStatus
from wspin.kube.client import Kube

log = logging.getLogger("controller.staging")


class RelayStagingPass:
    """Stages one Workspace's provider credentials per ``run``; see the module docstring."""

    def __init__(
        self,
        config: RelayStagingConfig,
        kube: Kube,
        *,
        redactor: Redactor,
        relay: RelaySecrets | None = None,
        source: CredentialSource | None = None,
        router: RouterClient | None = None,
        clock: Clock = utc_now,
        names: WorkspaceNames | None = None,
        staleness_bound: float = DEFAULT_STALENESS_BOUND,
        confirmers: str = "group:system:masters",
    ) -> None:
        self.config = config
        self.kube = kube
        self.redactor = redactor
        self.relay = relay or RelaySecrets(kube, config.namespace)
        self.source = source or CredentialSource(config)
        self.router = router or RouterClient(config.router_url)
        self.clock = clock
        self.events = EventRecorder(kube, clock=clock, redact=redactor.redact)
        self.handoffs = HandoffWriter(kube, config.router_url)
        self.names = names or WorkspaceNames()
        self.staleness_bound = staleness_bound
        self.confirmers = confirmers
        """The trusted writers, in words, who may confirm an unrecorded owner."""

    async def close(self) -> None:
        """Close the pooled connections to the credential source and the router."""
        await self.source.session.close()
        await self.router.session.close()

    # -- the pass ---------------------------------------------------------------------------

    async def run(self, ws: Obj) -> StagingReport:
        """One pass. A failed Kubernetes write comes back as the report's error, not raised,
        so the reconciler still records the workspace's own status before it retries."""
        try:
            report = await self._pass(ws)
        except KubeAPIError as err:
            meta = ws["metadata"]
            message = self.redactor.redact(f"relay staging write failed: {err}")
            log.error(
                "relay staging write failed",
                extra=fields(
                    workspace=f"{meta.get('namespace', '')}/{meta['name']}", error=message
                ),
            )
            return self._report([], error=TransientError(message))
        if report.requeue_after is None:
            # No deadline of its own (a source that was down, an unreadable public key, a
            # conflict whose owner may be gone): looked at again at the staleness bound.
            tick = staleness_tick(self.staleness_bound, str(ws["metadata"].get("uid") or ""))
            report = replace(report, requeue_after=tick)
        return report

    async def _pass(self, ws: Obj) -> StagingReport:
        holder = self.names.conflict(ws)
        if holder is not None:
            return self._report(
                await withdrawal.stand_down(self, ws, holder), remove=(cond.STALE, cond.REJECTED)
            )
        meta = ws["metadata"]
        name, generation = meta["name"], int(meta.get("generation") or 0)
        where = f"{meta.get('namespace', '')}/{name}"
        before = recorded(ws)
        uid = str(meta.get("uid") or "")
        code = cond.degraded_reason(ws)
        # The owner admission verified, never spec.owner as it stands: a tenant who names
        # someone else's userID must not have that user's keys fetched.
        record = record_of(ws)
        if record is None:
            return self._report([cond.owner_unverified(generation, self.confirmers)])
        owner = record.user_id
        lookup = {"uid": str(meta.get("uid") or ""), "namespace": str(meta.get("namespace") or "")}

        try:
            credentials = await self.source.providers(name, owner, **lookup)
        except InternalCallError as err:
            return self._early(where, generation, f"credential source unavailable: {err}")
        try:
            mint_key = await ensure_mint_key(self.relay, self.relay)
        except (RelaySecretError, KubeAPIError) as err:
            return self._early(where, generation, f"mint key unavailable: {err}")
        pub, problem = await read_hpke_pub(self.relay)
        if pub is None:
            log.warning("relay staging stopped", extra=fields(workspace=where, error=problem))
            return self._report([cond.not_staged(cond.PUB_UNREADABLE, problem, generation)])

        desired, skipped = desired_set(credentials)
        refused = [s.describe() for s in skipped if s.refused]
        skipped = [s for s in skipped if not s.refused]
        mine = before.get(STAGED_FOR, staged_for(ws))
        if mine != staged_for(ws):
            before = {}  # another Workspace's bookkeeping (a copied manifest): nothing staged
        bookkeeping = parse_providers(before.get(STAGED_PROVIDERS))
        self._register_staged(desired, bookkeeping)
        last_sealed = sealed_generation(before)
        # Bookkeeping that does not name its Workspace (none yet, or an earlier release's)
        # is sealed afresh: the envelopes behind it may hold a same-named Workspace's key.
        force = pub.generation != last_sealed or STAGED_FOR not in before

        wanted = {want.slug for want in desired}
        revocation = await revoke(
            name,
            uid,
            [slug for slug in bookkeeping if slug not in wanted],
            secrets=self.relay,
            bookkeeping=bookkeeping,
            redactor=self.redactor,
        )
        if has_legacy_annotations(ws):
            # Staged by an earlier release, whose record (on the tenant's object) says nothing
            # we may believe: this Workspace's own envelopes no longer bound go, by label.
            swept = await sweep_unbound(self.relay, name, uid, sorted(wanted))
            revocation.revoked += [slug for slug in swept if slug not in revocation.revoked]
        if revocation.revoked:  # announced now: an incomplete revocation stops the pass below
            await self.events.emit(
                ws,
                WORKSPACES,
                "Normal",
                cond.EVENT_CREDENTIAL_REVOKED,
                f"provider(s) {', '.join(revocation.revoked)} unbound: envelope deleted; "
                "in-flight tokens fail closed until the pod applies the removal",
            )
        cls = cond.staleness(code, revoked=revocation.any)
        if revocation.incomplete:
            await self._annotate(
                ws, {**before, STAGED_PROVIDERS: render_providers(bookkeeping)}, mine=False
            )
            stale = cond.stale(
                cls,
                code,
                tokens_failed=False,
                revocation=revocation.message(),
                generation=generation,
            )
            detail = "; ".join(revocation.errors)
            error = TransientError(self.redactor.redact(f"revocation incomplete: {detail}"))
            return self._report([stale] if stale else [], error=error)

        escalated, torn = 0, False
        if (
            not force
            and last_sealed > 0
            and bookkeeping
            and cls is cond.Staleness.CORRUPTION
            and lineage_intact(
                desired,
                bookkeeping,
                pub.key_id,
                before.get(STAGED_REVISION, ""),
                cond.applied_revision(ws),
            )
        ):
            outcome = await self._escalate(ws, where, mint_key)
            torn = outcome.result is Result.TORN
            if outcome.pub is not None:
                pub, force, escalated = outcome.pub, True, outcome.pub.generation

        try:
            sealer = Sealer(pub.public_key, pub.key_id)
        except EnvelopeError as err:
            return self._early(where, generation, f"sealer construction failed: {err}")
        for want in desired:
            if not needs_seal(bookkeeping.get(want.slug), want, pub.key_id, force=force):
                continue
            try:
                await seal(self.relay, self.redactor, ws, want, sealer, bookkeeping)
            except EnvelopeError as err:
                await self._annotate(
                    ws, {**before, STAGED_PROVIDERS: render_providers(bookkeeping)}, mine=False
                )
                message = f"envelope for provider {want.slug} absent: seal failed: {err}"
                log.error("relay staging stopped", extra=fields(workspace=where, error=message))
                return self._report([cond.not_staged(cond.ENVELOPE_MISSING, message, generation)])

        existing = await self.handoffs.read(ws)
        tokens = await renew(
            name,
            desired,
            existing.entries,
            key_id=pub.key_id,
            ttl=self.config.token_ttl,
            now=self.clock(),
            mint=lambda request: self.router.mint(request, mint_key),
            redact=self.redactor.redact,
        )
        rev = revision(self.config.router_url, tokens.entries, bookkeeping)
        await self.handoffs.write(ws, existing, rev, self.config.router_url, tokens.entries)

        if torn:
            staged = cond.not_staged(
                cond.WRONG_PUB_LINEAGE,
                f"torn rotation refused; nothing sealed against the unconfirmed key (handoff at "
                f"revision {rev}, keyID {pub.key_id})",
                generation,
            )
        else:
            message = cond.staged_message(
                len(tokens.entries),
                rev,
                pub.key_id,
                len(tokens.failed),
                [s.describe() for s in skipped],
            )
            staged = (
                cond.unscoped(refused, message, generation)
                if refused
                else cond.staged(message, generation)
            )
        stale = (
            cond.torn_rotation(generation)
            if torn
            else cond.stale(
                cls,
                code,
                tokens_failed=bool(tokens.failed),
                revocation=revocation.message(),
                generation=generation,
            )
        )
        rejected = cond.rejected(code, generation)
        await self._announce(ws, escalated, rejected)
        await self._annotate(
            ws,
            {
                SEALED_GENERATION: str(pub.generation),
                STAGED_REVISION: rev,
                STAGED_PROVIDERS: render_providers(bookkeeping),
                STAGED_FOR: staged_for(ws),
            },
        )
        found = [staged, *(c for c in (stale, rejected) if c is not None)]
        gone = tuple(t for t, c in ((cond.STALE, stale), (cond.REJECTED, rejected)) if c is None)
        after = next_pass_in(
            tokens.entries,
            ttl=self.config.token_ttl,
            now=self.clock(),
            bound=self.staleness_bound,
            uid=str(meta.get("uid") or ""),
            cache_left=self.source.expires_in(name, owner, **lookup),
        )
        return self._report(found, remove=gone, requeue_after=after)

    async def cleanup(self, ws: Obj) -> None:
        """Delete what this Workspace staged when it is deleted (see ``withdrawal``)."""
        await withdrawal.clean_up(self, ws)

    # -- steps ------------------------------------------------------------------------------

    async def _escalate(self, ws: Obj, where: str, mint_key: str) -> Escalation:
        """Run the rotate escalation and report its outcome (log lines, the failure Event)."""
        outcome = await escalate(self.relay, self.router, mint_key=mint_key, now=self.clock())
        detail = self.redactor.redact(outcome.detail)
        if outcome.result is Result.FAILED:
            log.error("rotate escalation failed", extra=fields(workspace=where, error=detail))
            await self.events.emit(
                ws,
                WORKSPACES,
                "Warning",
                cond.EVENT_ROTATE_ESCALATION_FAILED,
                f"router keypair rotation failed: {detail}; the 10-minute anti-storm budget "
                "was consumed",
            )
        elif outcome.result is Result.TORN:
            log.error("torn rotation refused", extra=fields(workspace=where, error=detail))
        elif outcome.result is Result.SKIPPED:
            log.info("rotate escalation skipped", extra=fields(workspace=where, why=detail))
        return outcome

    def _register_staged(self, desired: list[DesiredProvider], bookkeeping: Bookkeeping) -> None:
        """Keys already sealed by an earlier pass (or process) are redacted from now on."""
        for want in desired:
            staged = bookkeeping.get(want.slug)
            if staged is not None and staged.key_digest == want.key_digest:
                self.redactor.register(staged.redaction_id, want.credential.api_key)

    async def _announce(self, ws: Obj, escalated: int, rejected: Obj | None) -> None:
        if escalated:
            await self.events.emit(
                ws,
                WORKSPACES,
                "Normal",
                cond.EVENT_ROTATE_ESCALATED,
                f"router keypair rotated to generation {escalated}; credentials re-sealed",
            )
        if rejected is not None:
            current = find_condition(WorkspaceStatus.of(ws.get("status")).conditions, cond.REJECTED)
            if current is None or current.get("message") != rejected["message"]:
                await self.events.emit(
                    ws,
                    WORKSPACES,
                    "Warning",
                    cond.EVENT_ROUTER_REJECTED,
                    rejected["message"],
                    episode=rejected["message"],
                )

    async def _annotate(self, ws: Obj, wanted: dict[str, str], *, mine: bool = True) -> None:
        """Write the bookkeeping (status) when it changed; ``mine``: it describes this
        Workspace (an interrupted pass keeps the owner mark as it was)."""
        await write_bookkeeping(self.kube, ws, with_owner_mark(ws, wanted, mine=mine))

    def _early(self, where: str, generation: int, message: str) -> StagingReport:
        """Stop the pass with CredentialsStaged=False/StageFailed (CredentialStale untouched)."""
        log.warning(
            "relay staging stopped",
            extra=fields(workspace=where, error=self.redactor.redact(message)),
        )
        return self._report([cond.not_staged(cond.STAGE_FAILED, message, generation)])

    def _report(
        self,
        found: list[Obj],
        *,
        remove: tuple[str, ...] = (),
        error: Exception | None = None,
        requeue_after: float | None = None,
    ) -> StagingReport:
        """Every message redacted on the way out."""
        redacted = [
            {**c, "message": self.redactor.redact(str(c.get("message", "")))} for c in found
        ]
        return StagingReport(redacted, remove, error, requeue_after=requeue_after)
