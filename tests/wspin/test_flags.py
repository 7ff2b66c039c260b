"""Flags with environment fallbacks: bad values anywhere are a clear exit 1, never a traceback."""

from __future__ import annotations

import argparse

import pytest

from wspin.core.errors import ConfigError
from wspin.core.flags import Parser, add_flag, env_name
from wspinctl.cli import main


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


def _with_positional() -> argparse.ArgumentParser:
    parser = Parser(prog="t")
    add_flag(parser, "--no-cluster", default=False)
    parser.add_argument("image")
    return parser


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--no-cluster", "img"], True),
        (["img", "--no-cluster"], True),
        (["img"], False),
        (["--no-cluster=false", "img"], False),
        (["--no-cluster=TRUE", "img"], True),
        (["--no-cluster=false", "--no-cluster", "img"], True),
        (["--no-cluster", "--no-cluster=off", "img"], False),
    ],
)
def test_a_boolean_flag_is_a_plain_flag_and_never_takes_the_next_argument(
    argv: list[str], expected: bool
) -> None:
    args = _with_positional().parse_args(argv)
    assert (args.no_cluster, args.image) == (expected, "img")


def test_a_boolean_flag_given_false_overrides_a_true_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WSPIN_NO_CLUSTER", "true")
    assert _with_positional().parse_args(["img"]).no_cluster is True
    assert _with_positional().parse_args(["--no-cluster=false", "img"]).no_cluster is False


def test_a_boolean_flag_with_a_value_that_is_not_a_boolean_names_both_working_spellings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        _with_positional().parse_args(["--no-cluster=perhaps", "img"])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert (
        "--no-cluster is a plain flag: pass --no-cluster to turn it on, or --no-cluster=false"
        in (err)
    )
    # Both spellings the message suggests do parse.
    assert _with_positional().parse_args(["--no-cluster", "img"]).no_cluster is True
    assert _with_positional().parse_args(["--no-cluster=false", "img"]).no_cluster is False


def test_a_space_separated_value_after_a_boolean_flag_is_an_argument_not_the_flag_value() -> None:
    parser = Parser(prog="t")
    add_flag(parser, "--skip-image-volume-probe", default=False)
    with pytest.raises(SystemExit):
        parser.parse_args(["--skip-image-volume-probe", "false"])  # no positional is defined


def test_boolean_flags_of_a_sub_command_accept_the_value_spelling() -> None:
    parser = Parser(prog="t")
    sub = parser.add_subparsers(dest="command", required=True).add_parser("run")
    group = sub.add_argument_group("g")
    add_flag(group, "--dry", default=True)
    assert parser.parse_args(["run"]).dry is True
    assert parser.parse_args(["run", "--dry=false"]).dry is False
