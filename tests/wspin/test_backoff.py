"""The one exponential backoff (``wspin.core.backoff``) and the one uid jitter
(``wspin.core.jitter``) every retry schedule and spread deadline of both processes uses."""

from __future__ import annotations

import itertools
import uuid

import pytest

from wspin.core.backoff import Backoff
from wspin.core.jitter import fraction_of


def test_the_delay_doubles_from_the_base_after_each_failure() -> None:
    schedule = Backoff(30.0, 600.0)
    assert [schedule.delay(n) for n in range(1, 6)] == [30.0, 60.0, 120.0, 240.0, 480.0]


def test_no_failure_means_no_wait() -> None:
    assert Backoff(5.0, 120.0).delay(0) == 0.0
    assert Backoff(5.0, 120.0).delay(-3) == 0.0


def test_the_delay_stops_at_the_cap_however_many_failures() -> None:
    schedule = Backoff(0.005, 1000.0)
    assert schedule.delay(18) == 0.005 * 2**17 < 1000.0
    assert schedule.delay(19) == 1000.0
    # Far past the range of a float exponent: a hand-edited status count, say.
    assert schedule.delay(10**6) == 1000.0
    assert schedule.delay(2**63) == 1000.0


def test_another_factor_grows_by_it() -> None:
    assert [Backoff(1.0, 50.0, factor=3.0).delay(n) for n in range(1, 6)] == [1, 3, 9, 27, 50]


def test_delays_are_the_schedule_without_end() -> None:
    delays = list(itertools.islice(Backoff(2.0, 10.0).delays(), 6))
    assert delays == [2.0, 4.0, 8.0, 10.0, 10.0, 10.0]


@pytest.mark.parametrize("draw", [0.0, 0.25, 0.5, 0.999999])
def test_jitter_takes_at_most_its_fraction_off(draw: float) -> None:
    schedule = Backoff(0.2, 30.0, jitter=0.5)
    for failures in range(1, 12):
        full = schedule.delay(failures)
        waited = schedule.jittered(failures, lambda: draw)
        assert full * 0.5 <= waited <= full
    assert schedule.jittered(1, lambda: 0.0) == 0.1
    assert schedule.jittered(20, lambda: 0.0) == 15.0


def test_jitter_draws_at_random_within_its_bounds() -> None:
    schedule = Backoff(1.0, 8.0, jitter=0.25)
    waits = {schedule.jittered(4) for _ in range(200)}
    assert all(6.0 <= wait <= 8.0 for wait in waits)
    assert len(waits) > 100  # a random draw each time, not a fixed offset


def test_without_jitter_the_wait_is_the_delay() -> None:
    assert Backoff(1.0, 8.0).jittered(3) == 4.0


@pytest.mark.parametrize(
    "fields",
    [
        {"base": -1.0, "cap": 1.0},
        {"base": 1.0, "cap": -1.0},
        {"base": 1.0, "cap": 1.0, "factor": 0.5},
        {"base": 1.0, "cap": 1.0, "jitter": 1.5},
    ],
)
def test_a_schedule_that_would_shrink_or_go_negative_is_refused(fields: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="invalid backoff"):
        Backoff(**fields)


@pytest.mark.parametrize("uid", ["", "a", str(uuid.UUID(int=0)), str(uuid.UUID(int=2**128 - 1))])
def test_the_uid_fraction_is_stable_and_in_range(uid: str) -> None:
    assert 0 <= fraction_of(uid) < 1
    assert fraction_of(uid) == fraction_of(uid)


def test_the_uid_fraction_is_the_first_32_bits_of_the_sha256() -> None:
    # sha256("a") = ca978112…: the value pinned, so deadlines stay where they were.
    assert fraction_of("a") == 0xCA978112 / 2**32


def test_uid_fractions_spread_uniformly() -> None:
    fractions = [fraction_of(str(uuid.UUID(int=i))) for i in range(4000)]
    tenths = [sum(1 for f in fractions if k / 10 <= f < (k + 1) / 10) for k in range(10)]
    assert min(tenths) > 300 and max(tenths) < 500
