"""The ``wspin`` console script: one subcommand per job, each defined in its own module.

Each subcommand module exposes ``register(subparsers)``, which adds its parser and sets
``handler`` to a function taking the parsed args and returning the exit status.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from wspin.errors import ConfigError
from wspin.flags import Parser

# Imported lazily so `wspin inject` never pays for the controller's imports and vice versa.
SUBCOMMAND_MODULES = (
    "webhook.cli",
    "controller.cli",
    "certs.cli",
    "webhook.demo",
    "webhook.pins_cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="wspin",
        description="Digest-pinned agentd/opencode delivery for AI-agent workspace pods.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
    except ConfigError as err:  # a malformed WSPIN_* environment variable
        print(f"error: {err}", file=sys.stderr)
        return 1
    args = parser.parse_args(argv)
    status: int = args.handler(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
