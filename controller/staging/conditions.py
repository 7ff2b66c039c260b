"""The three relay conditions on a Workspace and the staleness class they come from. Pure.

- ``CredentialsStaged``: True with the revision after a completed pass; False with the reason
  of an early exit (which deliberately leaves ``CredentialStale`` alone: an infrastructure
  blip must not erase a corruption signal), or with ``ModelListMissing`` after a completed
  pass that refused a provider without a model list.
- ``CredentialStale``: why the running pod's relay material is not current, by precedence:
  failed mints, corruption, token expiry, revocation, delivery; removed when nothing is stale.
- ``CredentialRejected``: the router refused a token for a policy reason.

The staleness class is read from ``status.secretsDelivery.degradedReason`` (agentd's degrade
code, as the Workspace controller's agent scheduler last read it); a revocation in this pass
outranks it.
"""

from __future__ import annotations

import enum
from typing import Final

from controller.toolkit.conditions import ConditionStatus, condition
from controller.types import Obj
from wspin.core.workspace import WorkspaceStatus

STAGED: Final = "CredentialsStaged"
STALE: Final = "CredentialStale"
REJECTED: Final = "CredentialRejected"

# Reasons.
CREDENTIALS_STAGED: Final = "CredentialsStaged"
STAGE_FAILED: Final = "StageFailed"
PUB_UNREADABLE: Final = "StalePubUnreadable"
ENVELOPE_MISSING: Final = "StaleEnvelopeMissing"
WRONG_PUB_LINEAGE: Final = "StaleWrongPubLineage"
TOKEN_EXPIRED: Final = "StaleTokenExpired"  # noqa: S105 - a condition reason
REVOKED: Final = "StaleRevoked"
DELIVERY_DEFERRED: Final = "StaleDeliveryDeferred"
ROUTER_REJECTED: Final = "CredentialRouterRejected"
NAME_CONFLICT: Final = "NameConflict"
OWNER_UNVERIFIED: Final = "OwnerUnverified"
MODEL_LIST_MISSING: Final = "ModelListMissing"

# Event reasons: what a human should hear about once, beyond the conditions.
EVENT_CREDENTIAL_REVOKED: Final = "CredentialRevoked"
EVENT_ROTATE_ESCALATED: Final = "RelayRotateEscalated"
EVENT_ROTATE_ESCALATION_FAILED: Final = "RelayRotateEscalationFailed"
EVENT_ENVELOPE_ORPHANED: Final = "RelayEnvelopeOrphaned"
EVENT_ROUTER_REJECTED: Final = "CredentialRouterRejected"
EVENT_NAME_CONFLICT: Final = "RelayNameConflict"

# agentd degrade codes.
CODE_CREDENTIAL_STALE: Final = "credential_stale"
CODE_TOKEN_EXPIRED: Final = "token_expired"  # noqa: S105 - a degrade code
REJECTION_CODES: Final = frozenset(
    {"scope_violation", "sanitization_refused", "quota_exceeded", "credential_rejected"}
)


class Staleness(enum.Enum):
    NONE = "none"
    REVOCATION = "revocation"
    CORRUPTION = "corruption"
    TOKEN_EXPIRY = "token-expiry"  # noqa: S105 - a class name
    DELIVERY = "delivery"


def degraded_reason(ws: Obj) -> str:
    delivery = WorkspaceStatus.of(ws.get("status")).secrets_delivery
    return str(delivery.get("degradedReason") or "")


def applied_revision(ws: Obj) -> str:
    delivery = WorkspaceStatus.of(ws.get("status")).secrets_delivery
    return str(delivery.get("relayRevision") or "")


def staleness(code: str, *, revoked: bool) -> Staleness:
    if revoked:
        return Staleness.REVOCATION
    if not code:
        return Staleness.NONE
    if code == CODE_CREDENTIAL_STALE:
        return Staleness.CORRUPTION
    if code == CODE_TOKEN_EXPIRED:
        return Staleness.TOKEN_EXPIRY
    return Staleness.DELIVERY


def _make(type_: str, status: ConditionStatus, reason: str, message: str, gen: int) -> Obj:
    return condition(type_, status, reason, message, gen)


def staged(message: str, generation: int) -> Obj:
    return _make(STAGED, "True", CREDENTIALS_STAGED, message, generation)


def not_staged(reason: str, message: str, generation: int) -> Obj:
    return _make(STAGED, "False", reason, message, generation)


def staged_message(count: int, revision: str, key_id: str, failed: int, skipped: list[str]) -> str:
    message = f"{count} provider(s) staged at revision {revision} (keyID {key_id})"
    if failed:
        message += f"; {failed} token mint(s) failed"
    if skipped:
        message += f"; {len(skipped)} skipped (not relay-frontable): {', '.join(skipped)}"
    return message


def unscoped(refused: list[str], staged_message: str, generation: int) -> Obj:
    """``CredentialsStaged=False/ModelListMissing``: the providers ``refused`` (described as
    ``"slug" (kind: why)``) have no model list, so no token was minted for them; the rest
    was staged as ``staged_message`` says."""
    message = (
        f"no token minted for {', '.join(refused)}: the router would read an empty model "
        "allowlist as every model; give each of these credentials the models this workspace "
        f"may use (models[].id) in the API; {staged_message}"
    )
    return _make(STAGED, "False", MODEL_LIST_MISSING, message, generation)


def stale(
    cls: Staleness, code: str, *, tokens_failed: bool, revocation: str, generation: int
) -> Obj | None:
    """``CredentialStale`` by precedence, or None (remove it)."""
    if tokens_failed:
        message = "token mint failed; staged tokens incomplete"
        return _make(STALE, "True", STAGE_FAILED, message, generation)
    if cls is Staleness.CORRUPTION:
        message = (
            "the running pod reports credential_stale: its envelopes do not match the "
            "router's key lineage"
        )
        return _make(STALE, "True", WRONG_PUB_LINEAGE, message, generation)
    if cls is Staleness.TOKEN_EXPIRY:
        message = "the running pod reports token_expired (renewal owns this cause)"
        return _make(STALE, "True", TOKEN_EXPIRED, message, generation)
    if cls is Staleness.REVOCATION:
        return _make(STALE, "True", REVOKED, revocation, generation)
    if cls is Staleness.DELIVERY:
        message = (
            f"staged material not applied by the running pod: {code} "
            "(a wait or fault rotation cannot repair)"
        )
        return _make(STALE, "True", DELIVERY_DEFERRED, message, generation)
    return None


def torn_rotation(generation: int) -> Obj:
    return _make(
        STALE,
        "True",
        WRONG_PUB_LINEAGE,
        "torn rotation refused: the published public key does not match the router's rotate "
        "receipt; nothing sealed against the unconfirmed key",
        generation,
    )


def rejected(code: str, generation: int) -> Obj | None:
    """``CredentialRejected`` for a router policy rejection, or None (remove it)."""
    if code not in REJECTION_CODES:
        return None
    return _make(REJECTED, "True", ROUTER_REJECTED, f"router rejected a token: {code}", generation)


def owner_unverified(generation: int, confirmers: str) -> Obj:
    """CredentialsStaged=False: the Workspace carries no owner admission verified, so no key
    is looked up for anyone (``--owner-record-upgrade``)."""
    return _make(
        STAGED,
        "False",
        OWNER_UNVERIFIED,
        "no provider key is staged until the Workspace's owner is verified: it predates the "
        "owner record (llmsafespaces.dev/verified-owner). A trusted writer "
        f"({confirmers}) confirms spec.owner with `kubectl annotate workspace NAME "
        "llmsafespaces.dev/verified-owner=confirm`; with --owner-record-upgrade=adopt the "
        "controller asks for it itself",
        generation,
    )


def name_conflict(name: str, owner_namespace: str, generation: int) -> Obj:
    """``CredentialsStaged=False/NameConflict``: the relay identity belongs to another
    Workspace. Names the owner's namespace only: nothing of its credentials."""
    message = (
        f"not staged: the relay identity {name!r} belongs to the Workspace {name!r} in "
        f"namespace {owner_namespace!r}, created earlier (relay identities are Workspace names "
        "and span namespaces); rename this Workspace to stage its credentials"
    )
    return _make(STAGED, "False", NAME_CONFLICT, message, generation)
