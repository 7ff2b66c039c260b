"""The JSON log lines: a hot-path ``info_line`` renders exactly as a record with fields would,
goes through scrubbers, honours the level, and becomes an ordinary record whenever anything
else listens (a capturing test, an extra handler)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
import threading
import warnings
from collections.abc import Iterator

import pytest

from wspin.core import logs

VALUES = {"webhook": "mutate-pods", "uid": "u-1", "durationMs": 0.123, "dryRun": False}


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    saved_hooks = warnings.showwarning, sys.excepthook
    logs.setup_logging("info")
    out = io.StringIO()
    handler = root.handlers[0]
    assert isinstance(handler, logs.JSONLineHandler)
    handler.setStream(out)
    try:
        yield out
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        warnings.showwarning, sys.excepthook = saved_hooks


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_an_info_line_renders_as_the_record_would(stream: io.StringIO) -> None:
    log = logging.getLogger("wspin.test-lines")
    logs.info_line(log, "decided", VALUES)
    log.info("decided", extra=logs.fields(**VALUES))
    direct, record = lines(stream)
    assert list(direct) == list(record) == ["ts", "level", "logger", "msg", *VALUES]
    assert {k: v for k, v in direct.items() if k != "ts"} == {
        k: v for k, v in record.items() if k != "ts"
    }
    assert str(direct["ts"]).endswith("Z") and len(str(direct["ts"])) == len(
        "2026-12-01T12:00:00.000Z"
    )


def test_an_info_line_is_scrubbed_and_honours_the_level(stream: io.StringIO) -> None:
    log = logging.getLogger("wspin.test-lines")

    def scrub(line: str) -> str:
        return line.replace("u-1", "[redacted]")

    logs.add_scrubber(scrub)
    try:
        logs.info_line(log, "decided", VALUES)
    finally:
        logs.remove_scrubber(scrub)
    logging.getLogger().setLevel(logging.WARNING)
    logs.info_line(log, "not shown", VALUES)
    (line,) = lines(stream)
    assert line["uid"] == "[redacted]"


def test_an_info_line_is_a_record_when_something_else_listens(
    stream: io.StringIO, caplog: pytest.LogCaptureFixture
) -> None:
    log = logging.getLogger("wspin.test-lines")
    with caplog.at_level(logging.INFO, logger="wspin.test-lines"):
        logs.info_line(log, "decided", VALUES)
    (record,) = caplog.records
    assert record.getMessage() == "decided"
    assert record.fields == VALUES  # type: ignore[attr-defined]
    (line,) = lines(stream)  # the process's own handler still gets the line
    assert line["uid"] == "u-1"


def test_a_python_warning_is_a_line_of_the_log(stream: io.StringIO) -> None:
    # pytest records warnings by replacing showwarning for each test: install ours inside.
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        logs.setup_logging("info")
        logging.getLogger().handlers[0].setStream(stream)  # type: ignore[attr-defined]
        warnings.warn("DSA is deprecated", UserWarning, stacklevel=1)
    (line,) = lines(stream)
    assert line["level"] == "warning" and line["logger"] == "py.warnings"
    assert line["msg"] == "DSA is deprecated" and line["category"] == "UserWarning"
    assert str(line["source"]).startswith(__file__)


def test_an_error_that_ends_the_process_is_a_line_of_the_log(stream: io.StringIO) -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError as err:
        sys.excepthook(type(err), err, err.__traceback__)
    (line,) = lines(stream)
    assert line["level"] == "critical" and "RuntimeError: boom" in str(line["error"])


class _Writes(io.StringIO):
    """A stream that counts its writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


async def test_lines_held_per_turn_are_written_at_its_end_in_one_write() -> None:
    handler = logs.JSONLineHandler(out := _Writes())
    log = logging.getLogger("wspin.test-held")
    log.addHandler(handler)
    log.propagate = False
    try:
        handler.hold_lines_per_turn(asyncio.get_running_loop())
        for uid in ("a", "b", "c"):
            handler.write_info(log.name, "decided", {"uid": uid})
        assert out.getvalue() == ""  # held until the turn ends
        await asyncio.sleep(0)
        assert [json.loads(line)["uid"] for line in out.getvalue().splitlines()] == ["a", "b", "c"]
        assert out.writes == 1

        handler.write_info(log.name, "decided", {"uid": "d"})
        log.warning("a record")  # writes the held line first: the order holds
        assert [json.loads(line)["msg"] for line in out.getvalue().splitlines()][-2:] == [
            "decided",
            "a record",
        ]
        handler.write_info(log.name, "decided", {"uid": "e"})
        handler.flush()  # what logging.shutdown does at exit
        assert json.loads(out.getvalue().splitlines()[-1])["uid"] == "e"
    finally:
        log.removeHandler(handler)
        log.propagate = True


def test_lines_are_written_at_once_off_the_loop_or_its_thread() -> None:
    handler = logs.JSONLineHandler(out := _Writes())
    loop = asyncio.new_event_loop()
    try:
        handler.hold_lines_per_turn(loop)  # this thread, but the loop is not running
        handler.write_info("wspin.test", "decided", {"uid": "a"})
        assert out.writes == 1
        thread = threading.Thread(target=handler.write_info, args=("wspin.test", "m", {}))
        thread.start()
        thread.join()
        assert out.writes == 2
    finally:
        loop.close()
