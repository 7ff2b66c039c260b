"""Tokens in the handoff: reuse until half the TTL, what survives a failed mint, the revision,
and what a planted or edited entry gets (nothing: every field must be the controller's)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controller.staging.desired import (
    DesiredProvider,
    ProviderCredential,
    Staged,
)
from controller.staging.handoff import (
    HandoffEntry,
    parse_entries,
    render,
    reusable,
    revision,
    still_valid,
    written_by_controller,
)
from wspin.core.contract import LABEL_WORKSPACE_UID

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
WANT = DesiredProvider(
    ProviderCredential("openai", "openai", "k", models=("gpt-4o",)), "https://api.openai.com/v1"
)
WS = "ws1"


def entry(**overrides: object) -> HandoffEntry:
    base: dict[str, object] = {
        "providerSlug": "openai",
        "kind": "openai",
        "token": "lrt-1",
        "routerPath": "/w/ws1/openai/v1",
        "baseURL": "https://api.openai.com/v1",
        "modelAllowlist": ["gpt-4o"],
        "keyID": "hpke-g2",
        "expiresAt": "2026-11-29T13:00:00Z",
    }
    base.update(overrides)
    return base  # type: ignore[return-value]


class TestTokens:
    @pytest.mark.parametrize(
        ("minutes", "expected"), [(0, True), (30, True), (31, False), (61, False)]
    )
    def test_a_token_is_reused_until_half_its_lifetime(self, minutes: int, expected: bool) -> None:
        now = NOW + timedelta(minutes=minutes)
        assert reusable(entry(), WANT, "hpke-g2", now, 3600, workspace=WS) is expected

    @pytest.mark.parametrize(
        "changed",
        [
            {"keyID": "hpke-g3"},
            {"token": ""},
            {"expiresAt": "yesterday"},
            {"baseURL": "https://elsewhere/v1"},
            {"modelAllowlist": ["gpt-5"]},
            # A planted entry: a router path and token of another workspace's, or any extra.
            {"routerPath": "/w/other-ws/openai/v1"},
            {"routerPath": "https://attacker.example/v1"},
            {"kind": "anthropic"},
            {"token": 7},
            {"token": "x" * 5000},
            {"extra": "field"},
        ],
    )
    def test_a_token_whose_scope_or_key_changed_is_not_reused(
        self, changed: dict[str, object]
    ) -> None:
        assert not reusable(entry(**changed), WANT, "hpke-g2", NOW, 3600, workspace=WS)

    def test_an_entry_missing_a_field_is_not_reused(self) -> None:
        partial = entry()
        del partial["routerPath"]  # type: ignore[misc]
        assert not reusable(partial, WANT, "hpke-g2", NOW, 3600, workspace=WS)

    def test_a_token_is_kept_through_a_mint_failure_only_while_valid(self) -> None:
        later = NOW + timedelta(minutes=59)
        assert still_valid(entry(), WANT, "hpke-g2", later, workspace=WS)
        expired = NOW + timedelta(minutes=60)
        assert not still_valid(entry(), WANT, "hpke-g2", expired, workspace=WS)
        assert not still_valid(entry(), WANT, "hpke-g3", NOW, workspace=WS)

    @pytest.mark.parametrize(
        "changed",
        [
            {"baseURL": "https://elsewhere/v1"},
            {"modelAllowlist": ["gpt-5"]},
            {"routerPath": "/w/other-ws/openai/v1"},
        ],
    )
    def test_a_token_of_another_scope_is_not_kept_through_a_mint_failure(
        self, changed: dict[str, object]
    ) -> None:
        assert not still_valid(entry(**changed), WANT, "hpke-g2", NOW, workspace=WS)


class TestWhatIsRead:
    WS_OBJ = {"metadata": {"name": WS, "namespace": "team-a", "uid": "u-1"}}

    @staticmethod
    def secret(labels: dict[str, str], owner_uid: str = "u-1") -> dict[str, object]:
        return {
            "metadata": {
                "labels": labels,
                "ownerReferences": [{"controller": True, "uid": owner_uid, "kind": "Workspace"}],
            }
        }

    def test_only_a_handoff_the_controller_wrote_for_this_workspace_is_read(self) -> None:
        ours = self.secret({LABEL_WORKSPACE_UID: "u-1"})
        assert written_by_controller(ours, self.WS_OBJ)
        assert not written_by_controller(self.secret({}), self.WS_OBJ)  # planted: no label
        assert not written_by_controller(self.secret({LABEL_WORKSPACE_UID: "u-2"}), self.WS_OBJ)
        forged_owner = self.secret({LABEL_WORKSPACE_UID: "u-1"}, owner_uid="u-2")
        assert not written_by_controller(forged_owner, self.WS_OBJ)

    def test_entries_minted_for_another_router_are_not_read(self) -> None:
        raw = render({"revision": "r1", "routerURL": "http://router", "providers": [entry()]})
        assert list(parse_entries(raw, "http://router")) == ["openai"]
        assert parse_entries(raw, "http://other-router") == {}


class TestRevision:
    def test_the_revision_is_deterministic_and_order_free(self) -> None:
        a, b = entry(), entry(providerSlug="local")
        book = {"openai": Staged("k1", "hpke-g2", "m1", "staged:x")}
        first = revision("http://router", [a, b], book)
        assert first == revision("http://router", [b, a], book)
        assert first.startswith("r") and len(first) == 13

    @pytest.mark.parametrize(
        "change",
        [
            lambda e, b, u: ([{**e, "expiresAt": "2026-11-30T00:00:00Z"}], b, u),
            lambda e, b, u: ([{**e, "keyID": "hpke-g3"}], b, u),
            lambda e, b, u: ([e], {"openai": Staged("k2", "hpke-g2", "m1", "s")}, u),
            lambda e, b, u: ([e], b, "http://other"),
        ],
        ids=["token", "keyID", "key digest", "router"],
    )
    def test_any_change_moves_the_revision(self, change: object) -> None:
        book = {"openai": Staged("k1", "hpke-g2", "m1", "staged:x")}
        assert callable(change)
        entries, changed_book, url = change(entry(), book, "http://router")
        assert revision(url, entries, changed_book) != revision("http://router", [entry()], book)
