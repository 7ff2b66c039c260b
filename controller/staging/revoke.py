"""Revocation: a slug in the bookkeeping that is no longer desired loses its envelope.

Deleting the envelope is the revocation (the router evicts it and the next request with that
provider's token fails closed). A failed delete keeps the slug in the bookkeeping so the next
pass retries, and the message says the envelope is RETAINED: it never claims a deletion that
did not happen.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from controller.staging.bookkeeping import Bookkeeping
from controller.staging.envelopes import delete_envelope, envelope_name
from controller.staging.redact import Redactor
from controller.staging.secrets import RelaySecrets
from wspin.logs import fields
from wspin.resources import KubeAPIError

log = logging.getLogger("controller.staging")


@dataclass
class Revocation:
    """The outcome of one pass's revocations."""

    revoked: list[str] = field(default_factory=list)
    retained: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.revoked or self.retained)

    @property
    def incomplete(self) -> bool:
        return bool(self.retained)

    def message(self) -> str:
        parts = []
        if self.revoked:
            parts.append(
                f"provider(s) {', '.join(self.revoked)} unbound: envelope deleted; in-flight "
                "tokens fail closed until the pod applies the removal"
            )
        if self.retained:
            parts.append(
                f"revocation INCOMPLETE for {', '.join(self.retained)}: envelope RETAINED "
                "(delete failed, retrying)"
            )
        return "; ".join(parts)


async def revoke(
    workspace: str,
    slugs: list[str],
    *,
    secrets: RelaySecrets,
    bookkeeping: Bookkeeping,
    redactor: Redactor,
) -> Revocation:
    """Delete each slug's envelope; ``bookkeeping`` loses the slugs that are gone."""
    outcome = Revocation()
    for slug in slugs:
        try:
            await delete_envelope(secrets, workspace, slug)
        except KubeAPIError as err:
            log.error(
                "revocation delete failed — envelope retained, retrying",
                extra=fields(
                    workspace=workspace,
                    provider=slug,
                    envelope=envelope_name(workspace, slug),
                    error=str(err),
                ),
            )
            outcome.retained.append(slug)
            outcome.errors.append(f"{slug}: {err}")
            continue
        staged = bookkeeping.pop(slug, None)
        if staged is not None:
            redactor.unregister(staged.redaction_id)
        outcome.revoked.append(slug)
    return outcome
