"""Flags with environment fallbacks: bad values anywhere are a clear exit 1, never a traceback."""

from __future__ import annotations

import argparse

import pytest

from wspin.cli import main
from wspin.errors import ConfigError
from wspin.flags import Parser, add_flag, env_name


def build() -> argparse.ArgumentParser:
    parser = Parser(prog="t")
    add_flag(parser, "--port", type=int, default=8443)
    add_flag(parser, "--enabled", default=False)
    add_flag(parser, "--registry", action="append", default=None)
    return parser


def test_env_names_derive_from_the_flag() -> None:
    assert env_name("--agentd-binary-sha256-amd64") == "WSPIN_AGENTD_BINARY_SHA256_AMD64"


def test_the_environment_supplies_defaults_and_the_command_line_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WSPIN_PORT", "9443")
    monkeypatch.setenv("WSPIN_ENABLED", "true")
    monkeypatch.setenv("WSPIN_REGISTRY", "a:5000,b:5000")
    args = build().parse_args([])
    assert (args.port, args.enabled, args.registry) == (9443, True, ["a:5000", "b:5000"])
    args = build().parse_args(["--port", "1", "--enabled=false"])
    assert (args.port, args.enabled) == (1, False)
    assert build().parse_args(["--enabled"]).enabled is True


@pytest.mark.parametrize(("variable", "value"), [("WSPIN_PORT", "abc"), ("WSPIN_ENABLED", "maybe")])
def test_a_bad_environment_value_names_the_variable_and_the_flag(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=f"{variable} .*invalid value '{value}'"):
        build()


def test_usage_errors_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["webhook", "--port", "abc"])
    assert exited.value.code == 1
    assert "argument --port: invalid int value: 'abc'" in capsys.readouterr().err


def test_a_bad_environment_value_exits_1_from_the_console_script(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WSPIN_METRICS_PORT", "ninety")
    assert main(["webhook"]) == 1
    assert "WSPIN_METRICS_PORT (for --metrics-port)" in capsys.readouterr().err
