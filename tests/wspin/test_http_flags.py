"""The HTTP server's flags: each bound has one, the README's limits table names it, and a bad
value is refused at start naming the flag."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

from wspin.core.errors import ConfigError
from wspin.http.limits import ConnectionLimits
from wspin.http.settings import add_connection_flags, connection_limits_from_args

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
LIMITS_SECTION = README.split("### Limits", 1)[1].split("\n## ", 1)[0]


def parse(*argv: str) -> ConnectionLimits:
    parser = argparse.ArgumentParser()
    add_connection_flags(parser)
    return connection_limits_from_args(parser.parse_args(list(argv)))


def flags() -> list[str]:
    parser = argparse.ArgumentParser()
    add_connection_flags(parser)
    return sorted(set(re.findall(r"--[a-z-]+", parser.format_help())) - {"--help"})


def test_the_defaults_are_the_limits_defaults() -> None:
    assert parse() == ConnectionLimits()


def test_every_flag_sets_its_field() -> None:
    limits = parse(
        "--handshake-timeout=1",
        "--header-timeout=2",
        "--body-timeout=3",
        "--send-timeout=4",
        "--linger-timeout=0.5",
        "--drain-timeout=6",
        "--idle-timeout=100",
        "--max-connections=7",
        "--max-pipelined-requests=8",
        "--max-buffered-body-bytes=8388608",
        "--min-body-rate=1000",
        "--max-queued-output-bytes=2097152",
    )
    assert limits == dataclasses.replace(
        ConnectionLimits(),
        handshake_timeout=1,
        header_timeout=2,
        body_timeout=3,
        send_timeout=4,
        linger_timeout=0.5,
        drain_timeout=6,
        idle_timeout=100,
        max_connections=7,
        max_pipelined=8,
        max_buffered_body_bytes=8 * 1024 * 1024,
        min_body_rate=1000,
        max_queued_output_bytes=2 * 1024 * 1024,
    )


@pytest.mark.parametrize("flag", flags())
def test_the_readme_limits_table_names_every_flag(flag: str) -> None:
    assert f"`{flag}`" in LIMITS_SECTION


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--header-timeout=0"], "--header-timeout must be above 0"),
        (["--handshake-timeout=61"], "--handshake-timeout must be above 0 and at most 60"),
        (["--max-connections=0"], "--max-connections must be at least 1"),
        (["--max-pipelined-requests=0"], "--max-pipelined-requests must be at least 1"),
        (["--max-buffered-body-bytes=1024"], "--max-buffered-body-bytes must be at least"),
        (["--idle-timeout=60"], "--idle-timeout must be above the API server's 90 s"),
    ],
)
def test_a_bad_value_is_refused_naming_the_flag(argv: list[str], named: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse(*argv)
    assert named in str(refused.value)
