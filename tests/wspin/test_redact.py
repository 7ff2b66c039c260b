"""Redaction: every form a registered secret can take in our output, and credentials in URLs."""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wspin.core.redact import REPLACEMENT, Redactor, strip_url_credentials

TOKEN = 'tok"en/+ ü'


def redactor_for(*secrets: str) -> Redactor:
    redactor = Redactor()
    for n, secret in enumerate(secrets):
        redactor.register(f"group-{n}", secret)
    return redactor


class TestRegisteredSecrets:
    def test_every_plain_and_base64_form_of_a_secret_is_replaced(self) -> None:
        key = 'sk-"ab"/+?ключ'
        redactor = redactor_for(key)
        raw = key.encode()
        for form in (
            key,
            base64.b64encode(raw).decode(),
            base64.b64encode(raw).decode().rstrip("="),
            base64.urlsafe_b64encode(raw).decode(),
            base64.urlsafe_b64encode(raw).decode().rstrip("="),
            json.dumps(key)[1:-1],
            json.dumps(key, ensure_ascii=False)[1:-1],
            json.dumps(json.dumps(key)[1:-1])[1:-1],
        ):
            assert redactor.redact(f"before {form} after") == f"before {REPLACEMENT} after"

    def test_a_secret_in_a_json_log_line_is_replaced_and_the_line_stays_json(self) -> None:
        redactor = redactor_for('tok"en\\ü')
        line = json.dumps({"msg": 'raw tok"en\\ü', "error": "x"})
        assert redactor.redact(line) == json.dumps({"msg": f"raw {REPLACEMENT}", "error": "x"})
        assert redactor.redact('plain tok"en\\ü') == f"plain {REPLACEMENT}"

    def test_a_key_as_a_go_router_escapes_it_is_replaced_even_inside_a_log_line(self) -> None:
        """Go's encoding/json keeps non-ASCII raw and escapes ``<``, ``>``, ``&``; a router
        error body carried in a JSON log line is escaped a second time."""
        redactor = redactor_for('sk-"ключ"<&>-1')
        go_body = '{"detail":"bad key sk-\\"ключ\\"\\u003c\\u0026\\u003e-1"}'
        assert "ключ" in go_body and "\\u003c" in go_body
        for text in (
            go_body,
            json.dumps({"error": go_body}),
            json.dumps({"e": go_body}, ensure_ascii=False),
        ):
            redacted = redactor.redact(text)
            assert REPLACEMENT in redacted and "ключ" not in redacted and "043a" not in redacted

    @pytest.mark.parametrize(
        "form",
        [
            urllib.parse.quote(TOKEN, safe=""),
            urllib.parse.quote(TOKEN),
            urllib.parse.quote_plus(TOKEN),
            urllib.parse.quote(TOKEN, safe="").lower(),
            urllib.parse.quote(urllib.parse.quote(TOKEN, safe=""), safe=""),
            "tok%22en/%2B ü",
            "".join(f"%{b:02x}" for b in TOKEN.encode()),
        ],
    )
    def test_a_url_encoded_secret_is_replaced_in_any_mix_of_encodings(self, form: str) -> None:
        redactor = redactor_for(TOKEN)
        url = f"https://router.internal/v1/keys?token={form}&x=1"
        expected = f"https://router.internal/v1/keys?token={REPLACEMENT}&x=1"
        assert redactor.redact(url) == expected
        line = json.dumps({"msg": "redirected", "location": url})
        assert json.loads(redactor.redact(line))["location"] == expected

    def test_text_that_only_resembles_a_secret_is_left_alone(self) -> None:
        redactor = redactor_for("s3cr3t-token")
        assert redactor.redact("s3cr3t-tokeN and S3CR3T-TOKEN") == "s3cr3t-tokeN and S3CR3T-TOKEN"
        assert redactor.redact("s3cr3t%2Dtoken") == REPLACEMENT
        assert redactor.redact("s3cr3t-toke") == "s3cr3t-toke"

    def test_broken_encodings_are_plain_text(self) -> None:
        redactor = redactor_for("abcd")
        for text in ("%", "%2", "%zz", "\\", "\\u12", "\\uD800", "%E2%82", "%ff%ff%ff%ff"):
            assert redactor.redact(text) == text

    def test_unregistering_a_group_stops_its_redaction(self) -> None:
        redactor = Redactor()
        redactor.register("a", "secret-a-123")
        redactor.register("b", "secret-b-456")
        redactor.unregister("a")
        redactor.unregister("never-registered")
        assert redactor.redact("secret-a-123 secret-b-456") == f"secret-a-123 {REPLACEMENT}"
        assert redactor.groups() == frozenset({"b"})

    def test_registering_again_replaces_the_groups_secret(self) -> None:
        redactor = Redactor()
        redactor.register("a", "first-secret")
        redactor.register("a", "second-secret")
        assert redactor.redact("first-secret second-secret") == f"first-secret {REPLACEMENT}"

    def test_longer_values_win_over_values_they_contain(self) -> None:
        redactor = redactor_for("abcd", "abcdefgh")
        assert redactor.redact("xabcdefghx") == f"x{REPLACEMENT}x"

    def test_secrets_shorter_than_four_characters_are_not_registered(self) -> None:
        redactor = redactor_for("abc", "")
        assert redactor.redact("abc abc") == "abc abc"

    def test_keys_sharing_a_long_prefix_are_told_apart(self) -> None:
        redactor = Redactor()
        for i in range(200):
            redactor.register(f"staged:{i}", f"sk-proj-shared-prefix-{i:04d}")
        redactor.unregister("staged:7")
        text = "a sk-proj-shared-prefix-0042 b sk-proj-shared-prefix-0007 c"
        assert redactor.redact(text) == f"a {REPLACEMENT} b sk-proj-shared-prefix-0007 c"

    def test_nothing_registered_leaves_text_alone(self) -> None:
        assert Redactor().redact("plain") == "plain"

    def test_hostile_text_is_read_in_one_pass(self) -> None:
        # Every position starts a partial match here; a walk per start would take seconds.
        redactor = redactor_for("%%%%%%%%%%%%%%%%x", "\\\\\\\\\\\\\\\\y")
        text = "%25" * 20_000 + "\\\\" * 20_000
        assert redactor.redact(text) == text
        assert redactor.redact(text + "%25" * 16 + "x") == text + REPLACEMENT


class TestUrlCredentials:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("https://user:token@host/x", "https://***@host/x"),
            ("git+https://ghp_abc@github.com/o/r.git", "git+https://***@github.com/o/r.git"),
            (
                "see http://a:b@h:8080/p?q=1 and ftp://u@f/",
                "see http://***@h:8080/p?q=1 and ftp://***@f/",
            ),
            ("https://host/path@v1", "https://host/path@v1"),
            ("pkg@1.2.3", "pkg@1.2.3"),
            ("no url here", "no url here"),
            ("https://:@host/", "https://***@host/"),
            ("https://u:p@ss@host/x", "https://***@host/x"),
            (
                "'git+https://u:TOKEN@git.example/r.git@v1'",
                "'git+https://***@git.example/r.git@v1'",
            ),
            (
                '{"msg":"https://u:t@h/x","n":"ftp://a@b"}',
                '{"msg":"https://***@h/x","n":"ftp://***@b"}',
            ),
        ],
    )
    def test_user_and_password_in_a_url_become_stars(self, text: str, expected: str) -> None:
        assert strip_url_credentials(text) == expected


ENCODINGS: dict[str, Callable[[str], str]] = {
    "plain": lambda s: s,
    "json": lambda s: json.dumps(s)[1:-1],
    "json-twice": lambda s: json.dumps(json.dumps(s)[1:-1])[1:-1],
    "url": lambda s: urllib.parse.quote(s, safe=""),
    "url-plus": lambda s: urllib.parse.quote_plus(s),
    "url-twice": lambda s: urllib.parse.quote(urllib.parse.quote(s, safe=""), safe=""),
    "url-in-json": lambda s: json.dumps(urllib.parse.quote(s, safe=""))[1:-1],
    "base64": lambda s: base64.b64encode(s.encode()).decode(),
}


@given(
    secret=st.text(min_size=4, max_size=24),
    encoding=st.sampled_from(sorted(ENCODINGS)),
    before=st.text(max_size=20),
    after=st.text(max_size=20),
)
@settings(max_examples=300, deadline=None)
def test_no_encoding_of_a_registered_secret_survives(
    secret: str, encoding: str, before: str, after: str
) -> None:
    form = ENCODINGS[encoding](secret)
    redacted = redactor_for(secret).redact(before + form + after)
    assert form not in redacted
    assert REPLACEMENT in redacted
