"""Prometheus's own ``promtool``: checks rule files, runs their unit tests, parses queries.

Debian's ``prometheus`` package ships it; ``make test`` installs the package when promtool is
missing (``scripts/system-packages.sh``). Without it these tests fail and say how to get it,
rather than skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


def promtool_binary() -> str:
    configured = os.environ.get("WSPIN_PROMTOOL")
    found = configured or shutil.which("promtool") or "/usr/bin/promtool"
    if not Path(found).is_file():
        raise RuntimeError(
            f"promtool not found (looked for {found}): install Debian's prometheus package "
            "(apt-get install -y --no-install-recommends prometheus), which make test does when "
            "run as root, or set WSPIN_PROMTOOL to a promtool binary"
        )
    return found


@dataclass(frozen=True)
class PromtoolResult:
    returncode: int
    output: str


def run_promtool(args: Sequence[str], cwd: Path) -> PromtoolResult:
    """One promtool run; stdout and stderr together, in the order promtool wrote them."""
    proc = subprocess.run(
        [promtool_binary(), *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
        check=False,
    )
    return PromtoolResult(proc.returncode, proc.stdout)
