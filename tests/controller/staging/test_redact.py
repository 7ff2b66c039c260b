"""Redaction of staged keys: every form of a key, longest first, groups."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

from controller.staging.desired import (
    DesiredProvider,
    ProviderCredential,
)
from controller.staging.redact import REPLACEMENT, Redactor, group_id

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
WANT = DesiredProvider(
    ProviderCredential("openai", "openai", "k", models=("gpt-4o",)), "https://api.openai.com/v1"
)


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
