"""The per-workspace relay staging pass: provider keys sealed to the router, scoped tokens
handed to the workspace, revocation, conditions; run inside the Workspace reconcile.

Order (reference relay-staging.md §5.4): fetch the credentials, ensure the mint key, read the
public key (direct, never cached), work out the desired set and the bookkeeping, revoke what
is no longer bound, maybe escalate a rotation, seal what changed, mint or reuse tokens,
compute the revision, write the handoff, then the conditions, Events and annotations.

Business failures (credential source down, public key unreadable, seal or mint failures)
become conditions and the reconcile succeeds: relay trouble must not block the rest of the
workspace. Infrastructure write failures are returned as errors (retry with backoff).
Nothing changed → zero writes: the handoff is compared byte for byte, the annotations and
conditions are written only on change.

Every pass keeps its state in locals; the object holds only what is shared on purpose (the
clients, the credential cache, the process-wide redactor), so passes for different
workspaces run in parallel safely.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from controller.staging import conditions as cond
from controller.staging.arming import RelayStagingConfig
from controller.staging.bookkeeping import (
    SEALED_GENERATION,
    STAGED_PROVIDERS,
    STAGED_REVISION,
    Bookkeeping,
    Staged,
    annotations_of,
    needs_seal,
    parse_providers,
    render_providers,
    sealed_generation,
)
from controller.staging.desired import DesiredProvider, desired_set
from controller.staging.envelope import EnvelopeError, Sealer
from controller.staging.envelopes import envelope_name, envelope_secret, write_envelope
from controller.staging.escalation import Escalation, Result, escalate, lineage_intact
from controller.staging.events import (
    CREDENTIAL_REVOKED,
    ENVELOPE_ORPHANED,
    ROTATE_ESCALATED,
    ROTATE_ESCALATION_FAILED,
    ROUTER_REJECTED,
    EventRecorder,
)
from controller.staging.handoff import HandoffWriter
from controller.staging.internal_http import InternalCallError
from controller.staging.redact import Redactor, group_id
from controller.staging.revision import revision
from controller.staging.revoke import revoke
from controller.staging.router import RouterClient
from controller.staging.secrets import (
    HPKE_PUB_SECRET,
    HpkePublicKey,
    RelaySecretError,
    RelaySecrets,
    ensure_mint_key,
    parse_hpke_pub,
)
from controller.staging.source import CredentialSource
from controller.staging.tokens import renew
from controller.toolkit.conditions import find_condition
from controller.types import StagingReport
from wspin.errors import TransientError
from wspin.logs import fields
from wspin.resources import WORKSPACES, Kube, KubeAPIError, NotFound

log = logging.getLogger("controller.staging")

Obj = dict[str, Any]


def _utc_now() -> datetime:
    return datetime.now(UTC)


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
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.config = config
        self.kube = kube
        self.redactor = redactor
        self.relay = relay or RelaySecrets(kube, config.namespace)
        self.source = source or CredentialSource(config)
        self.router = router or RouterClient(config.router_url)
        self.clock = clock
        self.events = EventRecorder(kube, redactor.redact, clock)
        self.handoffs = HandoffWriter(kube)

    async def close(self) -> None:
        """Close the pooled connections to the credential source and the router."""
        await self.source.session.close()
        await self.router.session.close()

    # -- the pass ---------------------------------------------------------------------------

    async def run(self, ws: Obj) -> StagingReport:
        """One pass. A failed Kubernetes write comes back as the report's error, not raised,
        so the reconciler still records the workspace's own status before it retries."""
        try:
            return await self._pass(ws)
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

    async def _pass(self, ws: Obj) -> StagingReport:
        meta = ws["metadata"]
        name, generation = meta["name"], int(meta.get("generation") or 0)
        where = f"{meta.get('namespace', '')}/{name}"
        before = annotations_of(ws)
        code = cond.degraded_reason(ws)
        owner = str(((ws.get("spec") or {}).get("owner") or {}).get("userID") or "")

        try:
            credentials = await self.source.providers(name, owner)
        except InternalCallError as err:
            return self._early(where, generation, f"credential source unavailable: {err}")
        try:
            mint_key = await ensure_mint_key(self.relay, self.relay)
        except (RelaySecretError, KubeAPIError) as err:
            return self._early(where, generation, f"mint key unavailable: {err}")
        pub, problem = await self._read_pub()
        if pub is None:
            log.warning("relay staging stopped", extra=fields(workspace=where, error=problem))
            return self._report([cond.not_staged(cond.PUB_UNREADABLE, problem, generation)])

        desired, skipped = desired_set(credentials)
        bookkeeping = parse_providers(before.get(STAGED_PROVIDERS))
        self._register_staged(desired, bookkeeping)
        last_sealed = sealed_generation(before)
        force = pub.generation != last_sealed

        wanted = {want.slug for want in desired}
        revocation = await revoke(
            name,
            [slug for slug in bookkeeping if slug not in wanted],
            secrets=self.relay,
            bookkeeping=bookkeeping,
            redactor=self.redactor,
        )
        if revocation.revoked:  # announced now: an incomplete revocation stops the pass below
            await self.events.emit(
                ws,
                "Normal",
                CREDENTIAL_REVOKED,
                f"provider(s) {', '.join(revocation.revoked)} unbound: envelope deleted; "
                "in-flight tokens fail closed until the pod applies the removal",
            )
        cls = cond.staleness(code, revoked=revocation.any)
        if revocation.incomplete:
            await self._annotate(ws, {**before, STAGED_PROVIDERS: render_providers(bookkeeping)})
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
                await self._seal(name, want, sealer, bookkeeping)
            except EnvelopeError as err:
                await self._annotate(
                    ws, {**before, STAGED_PROVIDERS: render_providers(bookkeeping)}
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
            staged = cond.staged(message, generation)
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
            },
        )
        found = [staged, *(c for c in (stale, rejected) if c is not None)]
        gone = tuple(t for t, c in ((cond.STALE, stale), (cond.REJECTED, rejected)) if c is None)
        return self._report(found, remove=gone)

    async def cleanup(self, ws: Obj) -> None:
        """Delete every envelope this Workspace has (bookkeeping and handoff both name them);
        a failed delete is reported as orphaned, never raised: termination goes on."""
        name = ws["metadata"]["name"]
        where = f"{ws['metadata'].get('namespace', '')}/{name}"
        bookkeeping = parse_providers(annotations_of(ws).get(STAGED_PROVIDERS))
        slugs = set(bookkeeping)
        try:
            slugs |= set((await self.handoffs.read(ws)).entries)
        except KubeAPIError as err:
            log.warning(
                "handoff unreadable at cleanup", extra=fields(workspace=where, error=str(err))
            )
        for slug in sorted(slugs):
            secret = envelope_name(name, slug)
            try:
                await self.relay.delete(secret)
            except KubeAPIError as err:
                log.error(
                    "envelope ORPHANED",
                    extra=fields(workspace=where, provider=slug, envelope=secret, error=str(err)),
                )
                await self.events.emit(
                    ws,
                    "Warning",
                    ENVELOPE_ORPHANED,
                    f"could not delete envelope {self.config.namespace}/{secret} ({err}); "
                    "delete it by hand",
                )
            if slug in bookkeeping:
                self.redactor.unregister(bookkeeping[slug].redaction_id)
        owner = str(((ws.get("spec") or {}).get("owner") or {}).get("userID") or "")
        self.source.forget(name, owner)

    # -- steps ------------------------------------------------------------------------------

    async def _escalate(self, ws: Obj, where: str, mint_key: str) -> Escalation:
        """Run the rotate escalation and report its outcome (log lines, the failure Event)."""
        outcome = await escalate(self.relay, self.router, mint_key=mint_key, now=self.clock())
        detail = self.redactor.redact(outcome.detail)
        if outcome.result is Result.FAILED:
            log.error("rotate escalation failed", extra=fields(workspace=where, error=detail))
            await self.events.emit(
                ws,
                "Warning",
                ROTATE_ESCALATION_FAILED,
                f"router keypair rotation failed: {detail}; the 10-minute anti-storm budget "
                "was consumed",
            )
        elif outcome.result is Result.TORN:
            log.error("torn rotation refused", extra=fields(workspace=where, error=detail))
        elif outcome.result is Result.SKIPPED:
            log.info("rotate escalation skipped", extra=fields(workspace=where, why=detail))
        return outcome

    async def _read_pub(self) -> tuple[HpkePublicKey | None, str]:
        """The router's public key, read directly each pass (a rotation is seen at once)."""
        where = f"Secret {self.config.namespace}/{HPKE_PUB_SECRET}"
        try:
            secret = await self.relay.get(HPKE_PUB_SECRET)
        except KubeAPIError as err:
            return None, f"{where} unreadable: {err}"
        if secret is None:
            return None, f"{where} not found: router not bootstrapped, or KMS mode not yet wired"
        try:
            return parse_hpke_pub(secret), ""
        except RelaySecretError as err:
            return None, f"{where} is shape-invalid: {err.message} (seal-time parse fails loudly)"

    def _register_staged(self, desired: list[DesiredProvider], bookkeeping: Bookkeeping) -> None:
        """Keys already sealed by an earlier pass (or process) are redacted from now on."""
        for want in desired:
            staged = bookkeeping.get(want.slug)
            if staged is not None and staged.key_digest == want.key_digest:
                self.redactor.register(staged.redaction_id, want.credential.api_key)

    async def _seal(
        self, workspace: str, want: DesiredProvider, sealer: Sealer, bookkeeping: Bookkeeping
    ) -> None:
        envelope = sealer.seal(want.credential.api_key.encode())
        group = group_id(envelope)
        self.redactor.register(group, want.credential.api_key)  # before anything can echo it
        try:
            await write_envelope(
                self.relay, envelope_secret(workspace, want.slug, envelope, want.models)
            )
        except BaseException:
            # Not staged: the retry seals a new envelope with a group of its own.
            self.redactor.unregister(group)
            raise
        previous = bookkeeping.get(want.slug)
        if previous is not None and previous.redaction_id != group:
            self.redactor.unregister(previous.redaction_id)
        bookkeeping[want.slug] = Staged(want.key_digest, sealer.key_id, want.models_digest, group)

    async def _announce(self, ws: Obj, escalated: int, rejected: Obj | None) -> None:
        if escalated:
            await self.events.emit(
                ws,
                "Normal",
                ROTATE_ESCALATED,
                f"router keypair rotated to generation {escalated}; credentials re-sealed",
            )
        if rejected is not None:
            current = find_condition(
                (ws.get("status") or {}).get("conditions") or [], cond.REJECTED
            )
            if current is None or current.get("message") != rejected["message"]:
                await self.events.emit(ws, "Warning", ROUTER_REJECTED, rejected["message"])

    async def _annotate(self, ws: Obj, wanted: dict[str, str]) -> None:
        """Write the bookkeeping annotations when, and only when, they changed."""
        if annotations_of(ws) == wanted:
            return
        meta = ws["metadata"]
        patch = {
            "metadata": {
                "annotations": {
                    k: wanted.get(k) for k in (SEALED_GENERATION, STAGED_REVISION, STAGED_PROVIDERS)
                }
            }
        }
        try:
            await self.kube.patch(WORKSPACES, meta["name"], patch, meta.get("namespace"))
        except NotFound:
            return  # deleted meanwhile; cleanup runs on termination

    def _early(self, where: str, generation: int, message: str) -> StagingReport:
        """Stop the pass with CredentialsStaged=False/StageFailed (CredentialStale untouched)."""
        log.warning(
            "relay staging stopped",
            extra=fields(workspace=where, error=self.redactor.redact(message)),
        )
        return self._report([cond.not_staged(cond.STAGE_FAILED, message, generation)])

    def _report(
        self, found: list[Obj], *, remove: tuple[str, ...] = (), error: Exception | None = None
    ) -> StagingReport:
        """Every message redacted on the way out."""
        redacted = [
            {**c, "message": self.redactor.redact(str(c.get("message", "")))} for c in found
        ]
        return StagingReport(redacted, remove, error)
