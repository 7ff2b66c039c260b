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

import orjson

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
    """Render a record as one JSON object: time, level, logger, msg, then its fields.

    The webhook writes one line per admission decision, so this is on its hot path: orjson
    renders the line, and the timestamp's seconds part is formatted once per second.
    """

    _second = -1
    _stamp = ""

    def format(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if second != self._second:
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        entry: dict[str, Any] = {
            "ts": f"{self._stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        try:
            line = orjson.dumps(entry, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
        except orjson.JSONEncodeError:  # a field orjson cannot render (a huge int, deep nesting)
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
    # No record needs its caller's frame, thread or process (the logging HOWTO's
    # "Optimization" section): looking them up is most of the cost of an INFO record.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # aiohttp's access log duplicates our one-line-per-decision log.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def fields(**values: Any) -> dict[str, Any]:
    """``log.info("msg", extra=fields(uid=…))``: structured fields for the JSON line."""
    return {"fields": values}
