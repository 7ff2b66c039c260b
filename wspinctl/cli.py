"""The ``wspin`` console script: one subcommand per job, each defined in its own module.

Each subcommand module exposes ``register(subparsers)``, which adds its parser and sets
``handler`` to a function taking the parsed args and returning the exit status.

Only the module of the command being run is imported: ``wspin --help`` imports none, and
``wspin inject`` never pays for the controller's imports (or the controller for the webhook's).
Each module keeps its heavy imports (the Kubernetes client, cryptography, aiohttp) out of
``register``, so ``wspin <command> --help`` answers at once; tests/wspinctl/test_cli.py holds
every command to that.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from wspin.core.errors import ConfigError
from wspin.core.flags import Parser

Register = Callable[[Any], None]
"""A command module's ``register(subparsers)``."""


# One loader per command module. The import sits inside the function, where import-linter
# and mypy see it, and runs only for the command being run.
def _webhook() -> Register:
    from webhook import cli

    return cli.register


def _controller() -> Register:
    from controller import cli

    return cli.register


def _certs() -> Register:
    from certs import cli

    return cli.register


def _demo() -> Register:
    from webhook import demo_cli

    return demo_cli.register


def _pins() -> Register:
    from webhook import pins_cli

    return pins_cli.register


def _check() -> Register:
    from wspinctl import check_cli

    return check_cli.register


def _status() -> Register:
    from wspinctl import status_cli

    return status_cli.register


# command → (loader of the module whose register() adds it, one-line help for `wspin --help`).
COMMANDS: dict[str, tuple[Callable[[], Register], str]] = {
    "webhook": (_webhook, "serve the pod injector and the Workspace validator over HTTPS"),
    "inject": (_webhook, "inject delivery into manifests offline (like istioctl kube-inject)"),
    "controller": (_controller, "run the Workspace and InferenceRelay controllers"),
    "certs": (_certs, "generate webhook certificates or patch a CA bundle into the webhooks"),
    "demo": (_demo, "inject the example workspace pod through the webhook on loopback"),
    "pins": (_pins, "inspect the per-arch pins of a release image"),
    "check": (_check, "check that an installation is healthy, one named check each"),
    "status": (_status, "which workspace pods run which release, per namespace"),
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser with the full definition of the command named in ``argv`` (if any) and a
    one-line entry for every other command; with ``argv=None``, every command in full."""
    parser = Parser(
        prog="wspin",
        description="Digest-pinned agentd/opencode delivery for AI-agent workspace pods.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = list(COMMANDS) if argv is None else [_command_in(argv)]
    for load in dict.fromkeys(COMMANDS[name][0] for name in wanted if name is not None):
        load()(subparsers)
    for name, (_, help_text) in COMMANDS.items():
        if name not in subparsers.choices:
            subparsers.add_parser(name, help=help_text, add_help=False)
    return parser


def _command_in(argv: Sequence[str]) -> str | None:
    """The first argument naming a command; the top-level parser takes no other positionals
    and only ``-h``/``--help`` as options, so that is the command argparse will pick."""
    for arg in argv:
        if arg in COMMANDS:
            return arg
        if not arg.startswith("-"):
            return None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(args_in)
    except ConfigError as err:  # a malformed WSPIN_* environment variable
        print(f"error: {err}", file=sys.stderr)
        return 1
    args = parser.parse_args(args_in)
    status: int = args.handler(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
