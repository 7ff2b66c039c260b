"""JSON logging: one object per line, fields passed with ``extra={"fields": {...}}``.

Never log a secret: callers pass only what is safe to show; every line loses the user and
password of any URL in it, the process's redactor (``wspin.core.redact``) additionally scrubs
registered secrets from every line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
import time
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

import orjson

from wspin.core.redact import strip_url_credentials

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

    def timestamp(self, created: float) -> str:
        """``created`` (epoch seconds) as RFC 3339 UTC with milliseconds."""
        second = int(created)
        if second != self._second:
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._stamp}.{int((created - second) * 1000):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": self.timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        entry["msg"] = record.getMessage()
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return self.render(entry)

    def render(self, entry: dict[str, Any]) -> str:
        """The line for ``entry``, scrubbed."""
        try:
            line = orjson.dumps(entry, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
        except orjson.JSONEncodeError:  # a field orjson cannot render (a huge int, deep nesting)
            line = json.dumps(entry, default=str)
        # User and password of any URL in the line, whoever wrote it (a tenant's package
        # source, an operator's URL quoted in an error), before the process's own scrubbers.
        line = strip_url_credentials(line)
        for scrub in _scrubbers:
            line = scrub(line)
        return line


class JSONLineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler ``setup_logging`` installs. Besides records it takes ``info_line``'s
    lines, which it renders exactly as ``JSONFormatter`` renders a record with fields."""

    formatter: JSONFormatter

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.setFormatter(JSONFormatter())
        self._held: list[str] = []
        """``info_line`` lines of this turn of the event loop, not yet written."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0

    def hold_lines_per_turn(self, loop: asyncio.AbstractEventLoop) -> None:
        """From now on, ``info_line`` lines written on ``loop``'s thread are written together
        at the end of the loop's turn: one write for every review answered in that turn,
        rather than one each. Any other record writes them first, so the order holds; a
        process killed outright loses at most the lines of the turn it was in."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def write_info(self, logger: str, msg: str, values: dict[str, Any]) -> None:
        formatter = self.formatter
        entry = {"ts": formatter.timestamp(time.time()), "level": "info", "logger": logger}
        entry["msg"] = msg
        entry.update(values)
        line = formatter.render(entry) + self.terminator
        loop = self._loop
        with self.lock:  # type: ignore[union-attr]
            held = self._held
            held.append(line)
            if loop is None or threading.get_ident() != self._loop_thread or not loop.is_running():
                self.flush()
            elif len(held) == 1:
                loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write the lines held so far, then flush the stream."""
        with self.lock:  # type: ignore[union-attr]
            if self._held:
                self.stream.write("".join(self._held))
                self._held.clear()
            super().flush()

    def emit(self, record: logging.LogRecord) -> None:
        if self._held:
            self.flush()  # the lines before it, first
        super().emit(record)


_root_handler: JSONLineHandler | None = None


def hold_lines_per_turn(loop: asyncio.AbstractEventLoop) -> None:
    """``JSONLineHandler.hold_lines_per_turn`` on the process's handler, when
    ``setup_logging`` installed one."""
    if _root_handler is not None:
        _root_handler.hold_lines_per_turn(loop)


def setup_logging(level: str = "info") -> None:
    """Send JSON lines to stderr at ``level``; call once, first thing in each process."""
    global _root_handler
    handler = _root_handler = JSONLineHandler(sys.stderr)
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
    # What Python itself would print to stderr (a library's warning, a traceback that ends
    # the process) becomes a line of the log too, not text between its JSON objects.
    warnings.showwarning = _log_warning
    sys.excepthook = _log_uncaught


def _log_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` for the JSON log: the filters (once per place, by default)
    still decide whether it is shown; this decides only how."""
    logging.getLogger("py.warnings").warning(
        str(message), extra=fields(category=category.__name__, source=f"{filename}:{lineno}")
    )


def _log_uncaught(
    kind: type[BaseException], error: BaseException, traceback: TracebackType | None
) -> None:
    logging.getLogger("wspin").critical(
        "the process stopped on an unexpected error", exc_info=(kind, error, traceback)
    )


def info_line(logger: logging.Logger, msg: str, values: dict[str, Any]) -> None:
    """``logger.info(msg, extra=fields(**values))`` for a line written once per request.

    When the process logs through ``setup_logging``'s handler alone, the line goes to it
    directly: the same JSON, without a LogRecord and the handler chain, a third of the cost.
    Any other configuration (another handler on the root or on ``logger``, a test capturing
    records) gets an ordinary record.
    """
    if not logger.isEnabledFor(logging.INFO):
        return
    handler = _root_handler
    if (
        handler is not None
        and not logger.handlers
        and logger.propagate
        and logging.root.handlers == [handler]
    ):
        handler.write_info(logger.name, msg, values)
    else:
        logger.info(msg, extra={"fields": values})


def fields(**values: Any) -> dict[str, Any]:
    """``log.info("msg", extra=fields(uid=…))``: structured fields for the JSON line."""
    return {"fields": values}
