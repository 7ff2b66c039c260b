"""The requeue policy's one function: the earliest deadline that is set, never a hot loop."""

from __future__ import annotations

import pytest

from controller.types import Requeue
from controller.workspace.reconcile.deadlines import (
    MIN_REQUEUE,
    VERIFY_FAILURE_RECHECK,
    next_requeue,
)


@pytest.mark.parametrize(
    ("deadlines", "expected"),
    [
        ((), None),
        ((None, None), None),
        ((VERIFY_FAILURE_RECHECK, None), Requeue(VERIFY_FAILURE_RECHECK)),
        ((VERIFY_FAILURE_RECHECK, 42.5), Requeue(42.5)),
        ((None, 7.0, 3.0), Requeue(3.0)),
        ((0.0,), Requeue(MIN_REQUEUE)),
        ((-5.0, 60.0), Requeue(MIN_REQUEUE)),
    ],
)
def test_the_earliest_set_deadline_wins_and_an_overdue_one_still_waits_a_moment(
    deadlines: tuple[float | None, ...], expected: Requeue | None
) -> None:
    assert next_requeue(*deadlines) == expected
