"""The ``workspace-setup`` script: ``spec.packages`` installed, then ``spec.initScript`` run.

Every requirement is passed to the package manager single-quoted, after ``--`` where the
manager understands it, so a requirement is only ever a positional argument: shell
metacharacters and option-like values cannot escape (the Workspace validator also denies
them on admission; this is the second line). ``spec.initScript`` is the owner's own
script by design and runs unquoted, from a quoted heredoc so the shell expands nothing
while writing it.
"""

from __future__ import annotations

from typing import Final

from controller.types import Obj
from wspin.core.errors import WspinError
from wspin.core.workspace import WorkspaceSpec

PACKAGES_DIR: Final = "/workspace/packages"
MANAGERS: Final = ("pip", "npm", "go")
"""``spec.packages[].manager``; absent means pip."""
_HEREDOC: Final = "WSPIN_INIT_SCRIPT"
INIT_SCRIPT: Final = "/tmp/init-script.sh"  # noqa: S108 - /tmp is the PVC's tmp/ subtree


class PackagesError(WspinError):
    """``spec.packages`` or ``spec.initScript`` cannot become a setup script."""


def shell_quote(value: str) -> str:
    """POSIX single quotes; an embedded ``'`` becomes ``'\\''``."""
    return "'" + value.replace("'", "'\\''") + "'"


def needs_setup(spec: Obj) -> bool:
    """Whether the Workspace asks for anything the setup init would do."""
    view = WorkspaceSpec.of(spec)
    packages = view.packages or []
    wants_packages = isinstance(packages, list) and any(
        isinstance(p, dict) and p.get("requirements") for p in packages
    )
    return wants_packages or bool(view.init_script)


def setup_script(spec: Obj) -> str:
    """The ``/bin/sh`` script of the setup init; raises PackagesError naming the field."""
    lines = ["set -e", f"mkdir -p {PACKAGES_DIR}"]
    view = WorkspaceSpec.of(spec)
    packages = view.packages or []
    if not isinstance(packages, list):
        raise PackagesError("spec.packages must be a list of {manager, requirements}")
    for i, package_set in enumerate(packages):
        if not isinstance(package_set, dict):
            raise PackagesError(f"spec.packages[{i}] must be an object")
        manager = package_set.get("manager") or "pip"
        if manager not in MANAGERS:
            raise PackagesError(
                f"spec.packages[{i}].manager {manager!r} is not supported",
                f"use one of {', '.join(MANAGERS)}",
            )
        requirements = package_set.get("requirements") or []
        if not isinstance(requirements, list) or not all(isinstance(r, str) for r in requirements):
            raise PackagesError(f"spec.packages[{i}].requirements must be a list of strings")
        if not requirements:
            continue
        quoted = " ".join(shell_quote(r) for r in requirements)
        if manager == "npm":
            lines.append(f"cd {PACKAGES_DIR} && npm install -- {quoted}")
        elif manager == "go":
            # go install has no "--"; the validator's option-like check is what holds here.
            lines += [f"cd {PACKAGES_DIR} && go install {shell_quote(r)}" for r in requirements]
        else:
            lines.append(f"pip install --target={PACKAGES_DIR} -- {quoted}")
    init_script = view.init_script
    if init_script:
        if not isinstance(init_script, str):
            raise PackagesError("spec.initScript must be a string")
        if any(line == _HEREDOC for line in init_script.splitlines()):
            raise PackagesError(f"spec.initScript must not contain a line {_HEREDOC!r}")
        lines += [
            f"cat > {INIT_SCRIPT} << '{_HEREDOC}'",
            init_script.rstrip("\n"),
            _HEREDOC,
            f"chmod +x {INIT_SCRIPT}",
            INIT_SCRIPT,
        ]
    return "\n".join(lines) + "\n"
