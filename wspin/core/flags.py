"""argparse helpers, and the flags more than one command declares.

Every flag can also come from an environment variable. The environment is read once, while
the parser is built at start; nothing reads ``os.environ`` later, and only flag modules
(``*/settings.py``, ``*/cli.py``, ``*_cli.py`` and this one) import ``argparse`` or read the
environment at all (ruff's banned-API rule holds that). A flag given on the command line wins
over its variable.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from wspin.core.delivery import AgentdDelivery, OpencodeDelivery
from wspin.core.errors import ConfigError
from wspin.core.namespaces import FLAG as EXCLUDED_NAMESPACES_FLAG
from wspin.core.namespaces import WORKSPACES_FLAG
from wspin.core.owners import FLAG as TRUSTED_WRITERS_FLAG
from wspin.core.tenancy import LABEL_RUNTIME_CLASS_OVERRIDE, RUNTIME_CLASSES_FLAG

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

    Boolean flags are plain switches: ``--flag`` takes no value, so ``--no-cluster IMAGE``
    never swallows the positional after it. ``--flag=false`` (and ``=true``) stays accepted,
    so a chart or script can spell a setting either way; the environment takes true/false.
    """
    variable = env or env_name(flag)
    raw = os.environ.get(variable)
    if kwargs.get("type") is bool or isinstance(default, bool):
        kwargs.pop("type", None)
        value: Any = (
            _from_env(parse_bool, raw, flag, variable) if raw is not None else bool(default)
        )
        parser.add_argument(
            flag, action=_Switch, default=value, help=f"{help} [env {variable}]", **kwargs
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


class _Switch(argparse.Action):
    """A boolean flag: bare ``--flag`` sets True; ``Parser`` handles ``--flag=VALUE``."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, True)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors exit 1, like every other configuration error,
    and whose boolean flags accept ``--flag=true|false`` as well as the bare ``--flag``."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        given = list(sys.argv[1:] if args is None else args)
        remaining, spelled = self._take_switch_values(given)
        parsed, extra = super().parse_known_args(remaining, namespace)
        for dest, on in spelled.items():
            setattr(parsed, dest, on)
        return parsed, extra

    def _take_switch_values(self, args: list[str]) -> tuple[list[str], dict[str, bool]]:
        """Remove each ``--flag=VALUE`` of a boolean flag; return the last value per flag.

        argparse refuses a value on a zero-argument action, so the value is applied after
        parsing. A later bare ``--flag`` wins over an earlier ``--flag=false``. Stops at the
        first sub-command or ``--``: a sub-parser handles its own flags.
        """
        switches = {
            option: action
            for action in self._actions
            if isinstance(action, _Switch)
            for option in action.option_strings
        }
        kept: list[str] = []
        spelled: dict[str, bool] = {}
        for position, arg in enumerate(args):
            if arg == "--" or arg in self._subcommands():
                return kept + args[position:], spelled
            flag, equals, value = arg.partition("=")
            if flag not in switches:
                kept.append(arg)
                continue
            if not equals:
                spelled[switches[flag].dest] = True
                kept.append(arg)
                continue
            try:
                spelled[switches[flag].dest] = parse_bool(value)
            except argparse.ArgumentTypeError:
                self.error(
                    f"{flag} is a plain flag: pass {flag} to turn it on, or {flag}=false to "
                    f"turn it off (got {arg!r})"
                )
        return kept, spelled

    def _subcommands(self) -> frozenset[str]:
        return frozenset(
            name
            for action in self._actions
            if isinstance(action, argparse._SubParsersAction)
            for name in action.choices
        )

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


# -- flags several commands declare ---------------------------------------------------------


def add_delivery_flags(parser: argparse.ArgumentParser) -> None:
    """The six delivery flags, each also read from ``WSPIN_<FLAG>``."""
    group = parser.add_argument_group("delivery")
    for name in ("agentd", "opencode"):
        add_flag(
            group,
            f"--{name}-image",
            default="",
            help=f"{name} image, digest-pinned (repo@sha256:<64 hex>)",
        )
        for arch in ("amd64", "arm64"):
            add_flag(
                group,
                f"--{name}-binary-sha256-{arch}",
                default="",
                help=f"sha256 of the {arch} {name} binary (both or neither)",
            )


def deliveries_from_args(args: argparse.Namespace) -> tuple[AgentdDelivery, OpencodeDelivery]:
    """Build and validate both artifacts' delivery configuration from parsed flags."""
    agentd = AgentdDelivery(
        args.agentd_image, args.agentd_binary_sha256_amd64, args.agentd_binary_sha256_arm64
    )
    opencode = OpencodeDelivery(
        args.opencode_image, args.opencode_binary_sha256_amd64, args.opencode_binary_sha256_arm64
    )
    agentd.validate()
    opencode.validate()
    return agentd, opencode


def add_excluded_namespaces_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    add_flag(
        parser,
        EXCLUDED_NAMESPACES_FLAG,
        default="",
        help="comma-separated namespaces the pod webhook never sees (kube-system and this "
        "process's own namespace are always included); no workspace may run there",
    )


def add_workspace_writer_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
) -> None:
    """``--trusted-workspace-writers`` and ``--workspaces-namespace``: whose ``spec.owner`` is
    believed, and the namespace where only they write Workspaces (``wspin.core.owners``)."""
    add_flag(
        parser,
        TRUSTED_WRITERS_FLAG,
        default="",
        help="comma-separated usernames and group:NAME whose Workspace spec.owner is believed "
        "as written (group system:masters always is); anyone else may name only themselves",
    )
    add_flag(
        parser,
        WORKSPACES_FLAG,
        default="",
        help="namespace where the platform's API keeps Workspaces: only trusted writers may "
        "write Workspaces there; when it is this process's own namespace, it is not excluded",
    )


def add_runtime_classes_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--allowed-runtime-classes``: the webhook refuses, and the controller builds no pod
    for, any other ``spec.runtimeClass`` outside a namespace the platform labelled."""
    add_flag(
        parser,
        RUNTIME_CLASSES_FLAG,
        default="",
        help="comma-separated RuntimeClass names any Workspace may set in spec.runtimeClass; "
        f'others (and "") only in namespaces labelled {LABEL_RUNTIME_CLASS_OVERRIDE}=true',
    )


def add_kubeconfig_flag(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, what: str = "API access"
) -> None:
    """``--kubeconfig`` (env ``KUBECONFIG``, as kubectl reads it); unset, the in-cluster
    service account is used."""
    add_flag(
        parser,
        "--kubeconfig",
        env="KUBECONFIG",
        default=None,
        help=f"kubeconfig for {what} (default: $KUBECONFIG, else the in-cluster service account)",
    )


def flag_is_on(value: str) -> bool:
    """A boolean flag's value as the process parses it; one it would refuse (and exit 1 on)
    counts as off."""
    try:
        return parse_bool(value)
    except argparse.ArgumentTypeError:
        return False
