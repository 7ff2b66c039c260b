"""The pure parts of staging: redaction, the desired set, digests, bookkeeping, revision,
token reuse, and the conditions' precedence."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import pytest

from controller.staging import conditions as cond
from controller.staging.desired import (
    DesiredProvider,
    ProviderCredential,
    Staged,
    desired_set,
    go_json,
    parse_providers,
    render_providers,
    short_digest,
)
from controller.staging.escalation import lineage_intact
from controller.staging.handoff import HandoffEntry, reusable, revision, still_valid
from controller.staging.redact import REPLACEMENT, Redactor, group_id

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


class TestRedactor:
    def test_every_form_of_a_registered_key_is_replaced(self) -> None:
        redactor = Redactor()
        key = 'sk-"ab"/+?ключ'
        redactor.register("staged:x", key)
        raw = key.encode()
        for form in (
            key,
            base64.b64encode(raw).decode(),
            base64.urlsafe_b64encode(raw).decode().rstrip("="),
            json.dumps(key)[1:-1],
        ):
            assert redactor.redact(f"before {form} after") == f"before {REPLACEMENT} after"

    def test_a_key_as_a_go_router_encodes_it_is_replaced_even_inside_a_log_line(
        self,
    ) -> None:
        """Go's encoding/json keeps non-ASCII raw and escapes ``<``, ``>``, ``&``; a router
        error body carried in a JSON log line is escaped a second time."""
        redactor = Redactor()
        key = 'sk-"ключ"<&>-1'
        redactor.register("staged:x", key)
        go_body = '{"detail":"bad key sk-\\"ключ\\"\\u003c\\u0026\\u003e-1"}'
        assert "ключ" in go_body and "\\u003c" in go_body
        for text in (
            go_body,
            json.dumps({"error": go_body}),
            json.dumps({"e": go_body}, ensure_ascii=False),
        ):
            redacted = redactor.redact(text)
            assert REPLACEMENT in redacted and "ключ" not in redacted and "043a" not in redacted

    def test_unregistering_a_group_stops_its_redaction(self) -> None:
        redactor = Redactor()
        redactor.register("staged:a", "secret-a-123")
        redactor.register("staged:b", "secret-b-456")
        redactor.unregister("staged:a")
        assert redactor.redact("secret-a-123 secret-b-456") == f"secret-a-123 {REPLACEMENT}"

    def test_longer_values_win_over_values_they_contain(self) -> None:
        redactor = Redactor()
        redactor.register("staged:short", "abcd")
        redactor.register("staged:long", "abcdefgh")
        assert redactor.redact("xabcdefghx") == f"x{REPLACEMENT}x"

    def test_the_group_id_is_a_prefix_of_the_envelope_digest(self) -> None:
        group = group_id("stg:v1:hpke:hpke-g2:AAAA")
        assert group.startswith("staged:") and len(group) == len("staged:") + 16
        assert "=" not in group and group == group_id("stg:v1:hpke:hpke-g2:AAAA")

    def test_keys_sharing_a_long_prefix_are_told_apart(self) -> None:
        redactor = Redactor()
        for i in range(200):
            redactor.register(f"staged:{i}", f"sk-proj-shared-prefix-{i:04d}")
        redactor.unregister("staged:7")
        text = "a sk-proj-shared-prefix-0042 b sk-proj-shared-prefix-0007 c"
        assert redactor.redact(text) == f"a {REPLACEMENT} b sk-proj-shared-prefix-0007 c"

    def test_nothing_registered_leaves_text_alone(self) -> None:
        assert Redactor().redact("plain") == "plain"


class TestDesiredSet:
    def test_stageable_kinds_get_their_upstream_and_others_are_skipped(self) -> None:
        creds = [
            ProviderCredential("openai", "openai", "k1", models=("gpt-4o",)),
            ProviderCredential("openai_compatible", "local", "k2", base_url="https://l/v1"),
            ProviderCredential("openai_compatible", "bare", "k3"),
            ProviderCredential("bedrock", "aws", "k4"),
            ProviderCredential("openai", "openai", "k5"),  # a later binding of the same slug
            ProviderCredential("groq", "Bad_Slug", "k6"),
        ]
        desired, skipped = desired_set(creds)
        assert [(d.slug, d.upstream) for d in desired] == [
            ("openai", "https://api.openai.com/v1"),
            ("local", "https://l/v1"),
        ]
        assert desired[0].credential.api_key == "k1"
        assert [(s.slug, s.why) for s in skipped] == [
            ("bare", "no baseURL and no kind default"),
            ("aws", "not relay-frontable"),
            ("Bad_Slug", "slug is not a lowercase DNS label"),
        ]

    def test_a_credential_repr_never_shows_the_key(self) -> None:
        assert "sk-hidden" not in repr(ProviderCredential("openai", "o", "sk-hidden"))

    def test_digests_follow_go_json_so_a_go_controller_switch_does_not_reseal(self) -> None:
        assert go_json(["a<b", "c&d"]) == '["a\\u003cb","c\\u0026d"]'
        want = DesiredProvider(ProviderCredential("openai", "o", "k", models=("m1", "m2")), "u")
        assert want.models_digest == short_digest(b'["m1","m2"]')
        assert want.key_digest == short_digest(b"k") and len(want.key_digest) == 12


class TestLineage:
    BOOK: ClassVar = {"openai": Staged("k", "hpke-g2", "m", "staged:x")}
    WANT: ClassVar = [
        DesiredProvider(ProviderCredential("openai", "openai", "k"), "https://api.openai.com/v1")
    ]

    def test_lineage_holds_when_the_pod_applied_the_staged_revision_under_this_key(
        self,
    ) -> None:
        assert lineage_intact(self.WANT, self.BOOK, "hpke-g2", "rabc", "rabc")

    @pytest.mark.parametrize(
        ("key_id", "staged", "applied"),
        [
            ("hpke-g2", "rabc", "rold"),  # the pod runs an older revision
            ("hpke-g2", "rabc", ""),  # only spawnedRev reported: no relayRevision
            ("hpke-g2", "", ""),  # nothing staged yet
            ("hpke-g3", "rabc", "rabc"),  # sealed under another keyID
        ],
    )
    def test_lineage_is_broken_otherwise(self, key_id: str, staged: str, applied: str) -> None:
        assert not lineage_intact(self.WANT, self.BOOK, key_id, staged, applied)


class TestBookkeeping:
    def test_bookkeeping_round_trips_and_garbage_reads_as_empty(self) -> None:
        book = {"openai": Staged("aaa", "hpke-g2", "bbb", "staged:x")}
        assert parse_providers(render_providers(book)) == book
        for garbage in (None, "", "not json", "[]", '{"o": 1}', '{"o": {"keyID": 2}}'):
            assert parse_providers(garbage) == {}


def entry(**overrides: object) -> HandoffEntry:
    base: dict[str, object] = {
        "providerSlug": "openai",
        "kind": "openai",
        "token": "lrt-1",
        "routerPath": "/w/ws/openai/v1",
        "baseURL": "https://api.openai.com/v1",
        "modelAllowlist": ["gpt-4o"],
        "keyID": "hpke-g2",
        "expiresAt": "2026-11-29T13:00:00Z",
    }
    base.update(overrides)
    return base  # type: ignore[return-value]


WANT = DesiredProvider(
    ProviderCredential("openai", "openai", "k", models=("gpt-4o",)), "https://api.openai.com/v1"
)


class TestTokens:
    @pytest.mark.parametrize(
        ("minutes", "expected"), [(0, True), (30, True), (31, False), (61, False)]
    )
    def test_a_token_is_reused_until_half_its_lifetime(self, minutes: int, expected: bool) -> None:
        now = NOW + timedelta(minutes=minutes)
        assert reusable(entry(), WANT, "hpke-g2", now, 3600) is expected

    @pytest.mark.parametrize(
        "changed",
        [
            {"keyID": "hpke-g3"},
            {"token": ""},
            {"expiresAt": "yesterday"},
            {"baseURL": "https://elsewhere/v1"},
            {"modelAllowlist": ["gpt-5"]},
        ],
    )
    def test_a_token_whose_scope_or_key_changed_is_not_reused(
        self, changed: dict[str, object]
    ) -> None:
        assert not reusable(entry(**changed), WANT, "hpke-g2", NOW, 3600)

    def test_a_token_is_kept_through_a_mint_failure_only_while_valid(self) -> None:
        assert still_valid(entry(), WANT, "hpke-g2", NOW + timedelta(minutes=59))
        assert not still_valid(entry(), WANT, "hpke-g2", NOW + timedelta(minutes=60))
        assert not still_valid(entry(), WANT, "hpke-g3", NOW)

    @pytest.mark.parametrize(
        "changed", [{"baseURL": "https://elsewhere/v1"}, {"modelAllowlist": ["gpt-5"]}]
    )
    def test_a_token_of_another_scope_is_not_kept_through_a_mint_failure(
        self, changed: dict[str, object]
    ) -> None:
        assert not still_valid(entry(**changed), WANT, "hpke-g2", NOW)


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
