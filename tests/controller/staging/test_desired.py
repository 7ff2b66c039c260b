"""The desired set and the bookkeeping: which providers are staged, digests, the annotations."""

from __future__ import annotations

from datetime import UTC, datetime

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

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
WANT = DesiredProvider(
    ProviderCredential("openai", "openai", "k", models=("gpt-4o",)), "https://api.openai.com/v1"
)


class TestDesiredSet:
    def test_stageable_kinds_get_their_upstream_and_others_are_skipped(self) -> None:
        creds = [
            ProviderCredential("openai", "openai", "k1", models=("gpt-4o",)),
            ProviderCredential(
                "openai_compatible", "local", "k2", base_url="https://l/v1", models=("q",)
            ),
            ProviderCredential("openai_compatible", "bare", "k3"),
            ProviderCredential("bedrock", "aws", "k4"),
            ProviderCredential("openai", "openai", "k5"),  # a later binding of the same slug
            ProviderCredential("groq", "Bad_Slug", "k6"),
            ProviderCredential("mistral", "open-ended", "k7"),
        ]
        desired, skipped = desired_set(creds)
        assert [(d.slug, d.upstream) for d in desired] == [
            ("openai", "https://api.openai.com/v1"),
            ("local", "https://l/v1"),
        ]
        assert desired[0].credential.api_key == "k1"
        assert [(s.slug, s.why, s.refused) for s in skipped] == [
            ("bare", "no baseURL and no kind default", False),
            ("aws", "not relay-frontable", False),
            ("Bad_Slug", "slug is not a lowercase DNS label", False),
            ("open-ended", "no model list", True),
        ]

    def test_a_credential_repr_never_shows_the_key(self) -> None:
        assert "sk-hidden" not in repr(ProviderCredential("openai", "o", "sk-hidden"))

    def test_digests_follow_go_json_so_a_go_controller_switch_does_not_reseal(self) -> None:
        assert go_json(["a<b", "c&d"]) == '["a\\u003cb","c\\u0026d"]'
        want = DesiredProvider(ProviderCredential("openai", "o", "k", models=("m1", "m2")), "u")
        assert want.models_digest == short_digest(b'["m1","m2"]')
        assert want.key_digest == short_digest(b"k") and len(want.key_digest) == 12


class TestBookkeeping:
    def test_bookkeeping_round_trips_and_garbage_reads_as_empty(self) -> None:
        book = {"openai": Staged("aaa", "hpke-g2", "bbb", "staged:x")}
        assert parse_providers(render_providers(book)) == book
        for garbage in (None, "", "not json", "[]", '{"o": 1}', '{"o": {"keyID": 2}}'):
            assert parse_providers(garbage) == {}
