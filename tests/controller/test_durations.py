"""Go-style durations as the chart writes them."""

from __future__ import annotations

import pytest

from controller.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("24h", 86400.0),
        ("12h", 43200.0),
        ("90m", 5400.0),
        ("30s", 30.0),
        ("1h30m", 5400.0),
        ("500ms", 0.5),
        ("1.5h", 5400.0),
        ("0", 0.0),
        ("-1h", -3600.0),
        ("168h", 604800.0),
        ("2us", 2e-6),
    ],
)
def test_go_durations_parse_to_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "24", "1d", "h", "12 h", "abc", "1h-5m", "--1h"])
def test_malformed_durations_are_refused_with_the_expected_syntax(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(86400, "24h0m0s"), (90, "1m30s"), (0.5, "500ms"), (0, "0s"), (8 * 86400, "192h0m0s")],
)
def test_durations_format_like_go(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
