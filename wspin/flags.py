"""argparse helpers: every flag can also come from an environment variable.

The environment is read once, while the parser is built at start; nothing reads
``os.environ`` later. A flag given on the command line wins over its variable.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

from wspin.errors import ConfigError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_name(flag: str, prefix: str = "WSPIN_") -> str:
    """``--agentd-image`` → ``WSPIN_AGENTD_IMAGE``."""
    return prefix + flag.lstrip("-").replace("-", "_").upper()


def parse_bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def add_flag(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flag: str,
    *,
    env: str | None = None,
    default: Any = None,
    help: str = "",
    **kwargs: Any,
) -> None:
    """Add ``flag`` whose default comes from ``env`` (derived from the flag name if omitted).

    Boolean flags take ``--flag`` / ``--flag=false`` and ``true``/``false`` from the environment.
    """
    variable = env or env_name(flag)
    raw = os.environ.get(variable)
    if kwargs.get("type") is bool or isinstance(default, bool):
        kwargs.pop("type", None)
        value: Any = (
            _from_env(parse_bool, raw, flag, variable) if raw is not None else bool(default)
        )
        parser.add_argument(
            flag,
            nargs="?",
            const=True,
            default=value,
            type=parse_bool,
            help=f"{help} [env {variable}]",
            **kwargs,
        )
        return
    convert = kwargs.get("type")
    if raw is not None:
        if kwargs.get("action") == "append":
            value = [item for item in raw.split(",") if item]
        else:
            value = _from_env(convert, raw, flag, variable) if convert else raw
    else:
        value = default
    parser.add_argument(flag, default=value, help=f"{help} [env {variable}]", **kwargs)


def _from_env(convert: Any, raw: str, flag: str, variable: str) -> Any:
    """Convert an environment value now, so a bad one is a clear start-up error."""
    try:
        return convert(raw)
    except (ValueError, TypeError, argparse.ArgumentTypeError) as err:
        raise ConfigError(
            f"environment variable {variable} (for {flag}) has an invalid value {raw!r}: {err}",
            f"fix or unset {variable}, or pass {flag} on the command line",
        ) from err


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors exit 1, like every other configuration error."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")
