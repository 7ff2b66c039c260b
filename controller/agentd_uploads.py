"""Upload staging knobs: one ``--upload-staging`` flag, the env agentd reads them from (pure).

agentd stages file uploads in memory before applying them to the workspace; its compiled
defaults (48 MiB budget, 24 MiB credential floor, 4 concurrent, 15 min TTL, 60 s apply
timeout) hold for every knob left unset. A set knob lands verbatim, as env, on both
containers that run staging code: the ``workspace`` container (apply engine) and, in sidecar
mode, the ``agentd`` sidecar (admission and staging), so both halves see one configuration.

The flag is ``key=value`` pairs separated by commas
(``budget=50331648,floor=0,concurrent=4,ttlMs=900000,applyTimeoutMs=60000``). Unknown or
repeated keys are refused: a mistyped Helm value must not silently fall back to a default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

DEFAULT_APPLY_TIMEOUT_MS: Final = 60_000
"""agentd's apply timeout when ``applyTimeoutMs`` is unset."""
DEFAULT_TTL_MS: Final = 900_000
"""agentd's staging TTL (15 min) when ``ttlMs`` is unset."""
APPLY_SLACK_MS: Final = 5_000
"""The supervisor's slack on top of the apply timeout; the TTL must exceed both."""

KEYS: Final = ("budget", "floor", "concurrent", "ttlMs", "applyTimeoutMs")
_ENV: Final = {
    "budget": "UPLOAD_STAGING_BUDGET",
    "floor": "UPLOAD_STAGING_CREDENTIAL_FLOOR",
    "concurrent": "UPLOAD_STAGING_MAX_CONCURRENT",
    "ttlMs": "UPLOAD_STAGING_TTL_MS",
    "applyTimeoutMs": "UPLOAD_APPLY_TIMEOUT_MS",
}


@dataclass(frozen=True)
class UploadStagingConfig:
    """Each knob None = unset (agentd's default). Values are whole numbers."""

    budget: int | None = None
    """Bytes of staged uploads held at once (> 0)."""
    floor: int | None = None
    """Bytes of the budget reserved for credential uploads (>= 0; 0 disables the reserve)."""
    concurrent: int | None = None
    """Uploads staged at once (> 0)."""
    ttl_ms: int | None = None
    """Milliseconds a staged upload lives before the sweeper reclaims it (> 0)."""
    apply_timeout_ms: int | None = None
    """Milliseconds an apply may take (> 0)."""

    def _values(self) -> dict[str, int | None]:
        return {
            "budget": self.budget,
            "floor": self.floor,
            "concurrent": self.concurrent,
            "ttlMs": self.ttl_ms,
            "applyTimeoutMs": self.apply_timeout_ms,
        }

    def flag_value(self) -> str:
        """The ``--upload-staging`` text of this configuration ("" when nothing is set)."""
        return ",".join(f"{k}={v}" for k, v in self._values().items() if v is not None)

    def env(self) -> list[dict[str, str]]:
        """The set knobs as container env, in a fixed order (none when nothing is set)."""
        return [
            {"name": _ENV[k], "value": str(v)} for k, v in self._values().items() if v is not None
        ]


def parse_upload_staging(raw: str) -> UploadStagingConfig:
    """``--upload-staging`` → config; ValueError names the knob that is wrong."""
    values: dict[str, int] = {}
    if not raw.strip():
        return UploadStagingConfig()
    for part in raw.split(","):
        key, sep, text = part.strip().partition("=")
        if not sep:
            raise ValueError(f"knob {part.strip()!r}: want key=value")
        if key not in KEYS:
            raise ValueError(f"knob {key!r}: unknown key (use {', '.join(KEYS)})")
        if key in values:
            raise ValueError(f"knob {key!r} given twice")
        try:
            number = int(text.strip())
        except ValueError:
            raise ValueError(f"knob {key}={text!r}: want a whole number") from None
        if number < 0 or (number == 0 and key != "floor"):
            low = "0 or more" if key == "floor" else "a positive number"
            raise ValueError(f"knob {key}={number}: want {low}")
        values[key] = number
    ttl = values.get("ttlMs", DEFAULT_TTL_MS)
    apply_bound = values.get("applyTimeoutMs", DEFAULT_APPLY_TIMEOUT_MS) + APPLY_SLACK_MS
    if ttl <= apply_bound:
        # The sweeper would reclaim the temp file of an apply still in flight.
        raise ValueError(
            f"ttlMs {ttl} must exceed the apply bound applyTimeoutMs + {APPLY_SLACK_MS} = "
            f"{apply_bound} (unset knobs count as agentd's defaults: ttlMs {DEFAULT_TTL_MS}, "
            f"applyTimeoutMs {DEFAULT_APPLY_TIMEOUT_MS})"
        )
    return UploadStagingConfig(
        budget=values.get("budget"),
        floor=values.get("floor"),
        concurrent=values.get("concurrent"),
        ttl_ms=values.get("ttlMs"),
        apply_timeout_ms=values.get("applyTimeoutMs"),
    )
