"""The redaction group of a staged key: derived from its envelope, stable, URL-safe."""

from __future__ import annotations

from controller.staging.envelopes import REDACTION_GROUP_PREFIX, redaction_group


def test_the_redaction_group_is_a_prefix_of_the_envelope_digest() -> None:
    group = redaction_group("stg:v1:hpke:hpke-g2:AAAA")
    assert group.startswith(REDACTION_GROUP_PREFIX)
    assert len(group) == len(REDACTION_GROUP_PREFIX) + 16
    assert "=" not in group and group == redaction_group("stg:v1:hpke:hpke-g2:AAAA")
    assert group != redaction_group("stg:v1:hpke:hpke-g2:AAAB")
