"""Disaster recovery: asking the router to rotate its keypair when a pod reports envelopes
its key lineage cannot open, with one cluster-wide budget every 10 minutes.

It fires only when everything says the controller's own material is current and the router
still cannot open it: the generation did not move, something was sealed, the pod reports
``credential_stale``, and the lineage is intact (every desired provider sealed under the
current keyID, and the pod applied exactly the revision staged). Any other staleness has a
cheaper cause and never rotates.

The budget lives on the mint-key Secret (annotation ``last-rotate-escalation``), so it holds
across workspaces, replicas and restarts; the timestamp is written first, with the Secret's
resourceVersion, so two passes racing for it cannot both rotate. A rotation is adopted only
when the published public key matches the router's receipt; otherwise nothing is sealed
against the unconfirmed key (a torn rotation).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from controller.staging.clients import InternalCallError, RouterClient
from controller.staging.desired import Bookkeeping, DesiredProvider
from controller.staging.secrets import (
    HPKE_PUB_SECRET,
    MINT_KEY_SECRET,
    HpkePublicKey,
    RelaySecretError,
    RelaySecrets,
    parse_hpke_pub,
)
from wspin.core.clock import format_time, parse_time
from wspin.core.errors import Conflict, KubeAPIError
from wspin.core.logs import fields

log = logging.getLogger("controller.staging")

ESCALATION_ANNOTATION: Final = "llmsafespaces.dev/last-rotate-escalation"
ANTI_STORM: Final = timedelta(minutes=10)


class Result(enum.Enum):
    SKIPPED = "skipped"
    FAILED = "failed"
    TORN = "torn"
    ROTATED = "rotated"


@dataclass(frozen=True)
class Escalation:
    result: Result
    pub: HpkePublicKey | None = None
    """The confirmed new public key (ROTATED only)."""
    detail: str = ""


def lineage_intact(
    desired: list[DesiredProvider],
    bookkeeping: Bookkeeping,
    key_id: str,
    staged_revision: str,
    applied_revision: str,
) -> bool:
    """Every desired provider is sealed under ``key_id`` and the pod runs what was staged."""
    if not staged_revision or applied_revision != staged_revision:
        return False
    return all(
        (staged := bookkeeping.get(want.slug)) is not None and staged.key_id == key_id
        for want in desired
    )


async def escalate(
    secrets: RelaySecrets, router: RouterClient, *, mint_key: str, now: datetime
) -> Escalation:
    """Spend the budget and rotate, or skip when it was spent less than 10 minutes ago."""
    try:
        holder = await secrets.get(MINT_KEY_SECRET)
    except KubeAPIError as err:
        return Escalation(Result.SKIPPED, detail=f"reading {MINT_KEY_SECRET}: {err}")
    if holder is None:
        return Escalation(Result.SKIPPED, detail=f"{MINT_KEY_SECRET} is gone")
    annotations = holder.setdefault("metadata", {}).setdefault("annotations", {})
    last = parse_time(annotations.get(ESCALATION_ANNOTATION))
    if last is not None and now - last < ANTI_STORM:
        return Escalation(Result.SKIPPED, detail="anti-storm budget spent")
    annotations[ESCALATION_ANNOTATION] = format_time(now)
    try:
        await secrets.update(holder)  # carries its resourceVersion: one winner per budget
    except Conflict:
        return Escalation(Result.SKIPPED, detail="another pass took the budget first")
    except KubeAPIError as err:
        log.warning("rotate escalation not started", extra=fields(error=str(err)))
        return Escalation(Result.SKIPPED, detail=f"recording the escalation: {err}")
    try:
        receipt = await router.rotate(mint_key)
    except InternalCallError as err:
        return Escalation(Result.FAILED, detail=str(err))
    try:
        published = await secrets.get(HPKE_PUB_SECRET)
        pub = parse_hpke_pub(published) if published is not None else None
    except (KubeAPIError, RelaySecretError) as err:
        return Escalation(Result.TORN, detail=f"re-reading {HPKE_PUB_SECRET}: {err}")
    if pub is None:
        return Escalation(Result.TORN, detail=f"{HPKE_PUB_SECRET} is gone after the rotate")
    if pub.generation != receipt.generation or pub.public_key != receipt.public_key:
        return Escalation(
            Result.TORN,
            detail=(
                f"published generation {pub.generation} does not match the receipt's "
                f"{receipt.generation} (or its key differs)"
            ),
        )
    return Escalation(Result.ROTATED, pub=pub)
