"""The relay conditions: staleness classes and their precedence."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.staging import conditions as cond
from controller.staging.desired import (
    DesiredProvider,
    ProviderCredential,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
WANT = DesiredProvider(
    ProviderCredential("openai", "openai", "k", models=("gpt-4o",)), "https://api.openai.com/v1"
)


class TestConditions:
    @pytest.mark.parametrize(
        ("code", "revoked", "expected"),
        [
            ("", False, cond.Staleness.NONE),
            ("credential_stale", False, cond.Staleness.CORRUPTION),
            ("token_expired", False, cond.Staleness.TOKEN_EXPIRY),
            ("relay_unreachable", False, cond.Staleness.DELIVERY),
            ("credential_stale", True, cond.Staleness.REVOCATION),
        ],
    )
    def test_the_staleness_class_follows_the_degrade_code(
        self, code: str, revoked: bool, expected: cond.Staleness
    ) -> None:
        assert cond.staleness(code, revoked=revoked) is expected

    def test_failed_mints_outrank_every_other_staleness(self) -> None:
        stale = cond.stale(
            cond.Staleness.CORRUPTION,
            "credential_stale",
            tokens_failed=True,
            revocation="",
            generation=1,
        )
        assert stale is not None and stale["reason"] == "StageFailed"

    def test_nothing_stale_removes_the_condition(self) -> None:
        assert (
            cond.stale(cond.Staleness.NONE, "", tokens_failed=False, revocation="", generation=1)
            is None
        )
        assert cond.rejected("relay_unreachable", 1) is None
