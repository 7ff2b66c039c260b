"""Go-style durations (``12h``, ``90m``, ``1h30m``, ``500ms``), the syntax the chart and the
controller's flags use (as Kubernetes tooling does), parsed to and formatted from float
seconds. Pure.
"""

from __future__ import annotations

import re

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in ``text`` (Go ``time.ParseDuration`` syntax); ValueError when malformed."""
    raw = text.strip()
    sign = 1.0
    if raw[:1] in "+-" and raw:
        sign = -1.0 if raw[0] == "-" else 1.0
        raw = raw[1:]
    if raw == "0":
        return 0.0
    if not raw:
        raise ValueError(f"invalid duration {text!r}: empty")
    total, position = 0.0, 0
    while position < len(raw):
        match = _PART.match(raw, position)
        if match is None:
            raise ValueError(
                f"invalid duration {text!r}: expected a number and a unit "
                "(ns, us, ms, s, m, h), as in 24h, 90m, 30s"
            )
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    return sign * total


def format_duration(seconds: float) -> str:
    """Go's ``Duration.String()`` for whole and fractional seconds: ``24h0m0s``, ``1m30s``,
    ``500ms``, ``0s``."""
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    remaining = abs(seconds)
    if remaining < 1:
        millis = remaining * 1000
        return f"{sign}{millis:g}ms"
    hours, remaining = divmod(remaining, 3600)
    minutes, secs = divmod(remaining, 60)
    text = f"{secs:.9f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{sign}{int(hours)}h{int(minutes)}m{text}"
    if minutes:
        return f"{sign}{int(minutes)}m{text}"
    return sign + text
