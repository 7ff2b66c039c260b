"""When staging next needs a pass: token renewal at half the TTL with a per-Workspace
jitter, the revocation staleness bound, and the credential cache."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from controller.staging.handoff import HandoffEntry
from controller.staging.schedule import (
    MAX_RENEWAL_SPREAD,
    MIN_REQUEUE,
    OVERDUE_RETRY,
    TICK_SPREAD,
    next_pass_in,
    renewal_due,
    staleness_tick,
)
from wspin.core.clock import format_time
from wspin.core.jitter import fraction_of

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
HOUR = 3600.0
DAY = 24 * HOUR


def entry(expires_in: float, slug: str = "openai") -> HandoffEntry:
    return HandoffEntry(
        providerSlug=slug,
        kind="openai",
        token="lrt-x",
        routerPath=f"/w/ws1/{slug}/v1",
        baseURL="https://api.openai.com/v1",
        modelAllowlist=[],
        keyID="hpke-g1",
        expiresAt=format_time(NOW + timedelta(seconds=expires_in)),
    )


def test_renewal_is_due_when_the_first_token_reaches_half_its_ttl() -> None:
    entries = [entry(DAY, "a"), entry(DAY - 600, "b")]
    assert renewal_due(entries, ttl=DAY, now=NOW) == DAY / 2 - 600
    assert renewal_due([], ttl=DAY, now=NOW) is None
    broken = entry(DAY)
    broken["expiresAt"] = "not a time"
    assert renewal_due([broken], ttl=DAY, now=NOW) is None


def test_without_tokens_the_pass_comes_back_within_the_staleness_bound() -> None:
    for _ in range(50):
        after = next_pass_in([], ttl=DAY, now=NOW, bound=120, uid=str(uuid.uuid4()))
        assert 120 * (1 - TICK_SPREAD) <= after <= 120


def test_a_token_near_its_half_life_wins_over_the_bound() -> None:
    uid = str(uuid.uuid4())
    after = next_pass_in([entry(HOUR / 2 + 30)], ttl=HOUR, now=NOW, bound=HOUR, uid=uid)
    assert 30 <= after <= 30 + HOUR * 0.1
    assert after == 30 + HOUR * 0.1 * fraction_of(uid)


def test_a_renewal_already_due_is_retried_soon_but_not_in_a_spin() -> None:
    after = next_pass_in([entry(HOUR / 2 - 5)], ttl=HOUR, now=NOW, bound=120, uid="u")
    assert after == OVERDUE_RETRY
    assert next_pass_in([entry(1)], ttl=HOUR, now=NOW, bound=5, uid="u") >= MIN_REQUEUE


def test_the_staleness_tick_never_lands_before_the_cached_credentials_expire() -> None:
    assert staleness_tick(30, "u", cache_left=55) == 55
    assert staleness_tick(120, "u", cache_left=55) <= 120


def test_ten_thousand_workspaces_minted_in_one_second_renew_spread_out() -> None:
    entries = [entry(DAY)]
    seconds = {
        int(next_pass_in(entries, ttl=DAY, now=NOW, bound=DAY, uid=str(uuid.uuid4())))
        for _ in range(10_000)
    }
    # Spread over the whole window, not one burst: at most a handful per second.
    assert len(seconds) > 0.9 * MAX_RENEWAL_SPREAD
    assert min(seconds) >= DAY / 2 and max(seconds) <= DAY / 2 + MAX_RENEWAL_SPREAD


@pytest.mark.parametrize("uid", ["", "a", str(uuid.UUID(int=0)), str(uuid.UUID(int=2**128 - 1))])
def test_the_jitter_is_a_stable_fraction(uid: str) -> None:
    assert 0 <= fraction_of(uid) < 1
    assert fraction_of(uid) == fraction_of(uid)
