"""When a Workspace's staging next needs a pass, with no event to trigger it. Pure.

An Active Workspace whose pod and spec do not change is never reconciled by an event, yet
its tokens expire, its owner unbinds or rotates a credential, and its pod starts reporting a
degrade code. The pass therefore returns ``requeue_after``, the earliest of:

- **token renewal**: the first token to reach half its TTL (the pass mints a new one then);
- **the staleness bound** (``--relay-revocation-staleness-bound``, 120 s by default): an
  unbound credential is revoked, a rotated key re-sealed and a new degrade code acted on
  within it. A pass before the credential cache expires would read the same cached set and
  could not see a revocation, so this deadline never lands before the cache entry expires.

Both carry a jitter taken from the Workspace's uid (``wspin.core.jitter``): stable per
Workspace and spread uniformly over Workspaces, so 10,000 tokens minted in the same second (a
controller restart, a keypair rotation) are renewed over a window instead of in one burst, and
stay spread in every later cycle. The staleness tick is only ever moved earlier, so the bound holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Final

from controller.staging.handoff import HandoffEntry
from wspin.core.clock import parse_time
from wspin.core.jitter import fraction_of

DEFAULT_STALENESS_BOUND: Final = 120.0
RENEWAL_SPREAD: Final = 0.1
"""Renewals spread over this fraction of the TTL after the half-life (at most
``MAX_RENEWAL_SPREAD``): a token then lives between 50 % and 60 % of its TTL in the handoff."""
MAX_RENEWAL_SPREAD: Final = 600.0
TICK_SPREAD: Final = 0.1
"""The staleness tick lands within the last 10 % of the bound."""
OVERDUE_RETRY: Final = 30.0
"""A renewal already due (its mint failed) is retried this soon; the old token still works
until it expires, so there is no point in retrying faster than the router can recover."""
MIN_REQUEUE: Final = 1.0


def renewal_due(entries: Iterable[HandoffEntry], *, ttl: float, now: datetime) -> float | None:
    """Seconds until the first token reaches half its TTL (negative: overdue); None for none."""
    due: float | None = None
    for entry in entries:
        expires = parse_time(entry.get("expiresAt"))
        if expires is None:
            continue
        left = (expires - now).total_seconds() - ttl / 2
        due = left if due is None else min(due, left)
    return due


def staleness_tick(bound: float, uid: str, cache_left: float | None = None) -> float:
    """The staleness deadline with its jitter, not before the credential cache expires."""
    tick = bound * (1 - TICK_SPREAD * fraction_of(uid))
    if cache_left is not None:
        tick = max(tick, cache_left)
    return max(MIN_REQUEUE, tick)


def next_pass_in(
    entries: Iterable[HandoffEntry],
    *,
    ttl: float,
    now: datetime,
    bound: float,
    uid: str,
    cache_left: float | None = None,
) -> float:
    """Seconds until this Workspace's staging next needs a pass."""
    tick = staleness_tick(bound, uid, cache_left)
    due = renewal_due(entries, ttl=ttl, now=now)
    if due is None:
        return tick
    if due <= 0:
        return max(MIN_REQUEUE, min(tick, OVERDUE_RETRY))
    spread = min(ttl * RENEWAL_SPREAD, MAX_RENEWAL_SPREAD)
    return max(MIN_REQUEUE, min(tick, due + spread * fraction_of(uid)))
