"""The console script: help answers at once, and every flag an error suggests exists.

`wspin --help` and `wspin <command> --help` must not import the Kubernetes client,
cryptography or aiohttp (together over a second of start-up); the import check says which
module pulled one in (the start-up itself is a figure of ``bench/cli_help.py``).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from wspinctl import cli

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("kubernetes_asyncio", "cryptography", "aiohttp", "boto3", "oci", "moto")

# Every way to ask for help: the top level, each command, and each nested action.
HELP_ARGVS = [
    ["--help"],
    *([name, "--help"] for name in cli.COMMANDS),
    ["certs", "generate", "--help"],
    ["certs", "patch-ca-bundle", "--help"],
    ["pins", "resolve", "--help"],
]

_IMPORTS = r"""
import json, sys
from wspinctl import cli
try:
    cli.main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
else:
    code = None
print("\n@@" + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _IMPORTS, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )


@pytest.mark.parametrize("argv", HELP_ARGVS, ids=" ".join)
def test_help_prints_usage_without_importing_heavy_modules(argv: list[str]) -> None:
    proc = _run(argv)
    report = json.loads(proc.stdout.rsplit("@@", 1)[1])
    assert report["code"] == 0, proc.stderr
    assert "usage: wspin" in proc.stdout
    heavy = [m for m in report["modules"] if m.split(".")[0] in HEAVY]
    assert heavy == [], f"`wspin {' '.join(argv)}` imported {heavy[:5]}"


def test_the_top_level_help_lists_every_command() -> None:
    out = _run(["--help"]).stdout
    for name in cli.COMMANDS:
        assert re.search(rf"^\s+{name}\s", out, re.M), name


def test_a_command_runs_with_only_its_own_module_imported() -> None:
    proc = _run(["inject", "--help"])
    modules = json.loads(proc.stdout.rsplit("@@", 1)[1])["modules"]
    assert "controller.cli" not in modules and "webhook.cli" in modules


def _every_option() -> set[str]:
    """Every option string of every command and nested action, from the real parsers."""
    options: set[str] = set()
    pending = [cli.build_parser([name]) for name in cli.COMMANDS]
    while pending:
        parser = pending.pop()
        for action in parser._actions:
            options.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                pending.extend(action.choices.values())
    return options


_SUGGESTION = re.compile(r"\b(?:pass|set|use|with|run with|or) (--[a-z0-9][a-z0-9-]*)")


def test_every_flag_an_error_message_suggests_is_a_real_flag() -> None:
    known = _every_option()
    suggested: dict[str, str] = {}
    for package in ("wspinctl", "wspin", "webhook", "controller", "certs"):
        for path in sorted((REPO / package).rglob("*.py")):
            for flag in _SUGGESTION.findall(path.read_text()):
                suggested.setdefault(flag, path.relative_to(REPO).as_posix())
    assert suggested, "the scan found no suggestions at all"
    unknown = {flag: where for flag, where in suggested.items() if flag not in known}
    assert unknown == {}
