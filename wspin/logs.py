"""JSON logging: one object per line, fields passed with ``extra={"fields": {...}}``.

Never log a secret: callers pass only what is safe to show; the controller's redactor
(``controller/staging/redact.py``) additionally scrubs staged keys from every line.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

_Scrubber = Callable[[str], str]
_scrubbers: list[_Scrubber] = []


def add_scrubber(scrub: _Scrubber) -> None:
    """Register a function applied to every rendered log line (used to redact secrets)."""
    _scrubbers.append(scrub)


def remove_scrubber(scrub: _Scrubber) -> None:
    """Undo ``add_scrubber`` (a no-op when ``scrub`` is not registered)."""
    if scrub in _scrubbers:
        _scrubbers.remove(scrub)


class JSONFormatter(logging.Formatter):
    """Render a record as one JSON object: time, level, logger, msg, then its fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        line = json.dumps(entry, default=str)
        for scrub in _scrubbers:
            line = scrub(line)
        return line


def setup_logging(level: str = "info") -> None:
    """Send JSON lines to stderr at ``level``; call once, first thing in each process."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiohttp's access log duplicates our one-line-per-decision log.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def fields(**values: Any) -> dict[str, Any]:
    """``log.info("msg", extra=fields(uid=…))``: structured fields for the JSON line."""
    return {"fields": values}
