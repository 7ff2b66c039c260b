"""Every supported Python on this machine, each with wspin's runtime dependencies, for the
tests that run a process under each (the bounded shutdown differs between 3.11 and 3.12+).

The development venv serves its own interpreter. Any other supported interpreter found (on
PATH, or installed by pyenv) gets a venv of its own under ``.tools/pythons/<version>`` with the
runtime dependencies from PyPI wheels, and runs the repository from ``PYTHONPATH``: compiled
dependencies (httptools, orjson, cryptography) are built for one interpreter's ABI, so the
development venv's site-packages are never shared. ``make test`` prepares them
(``python -m tests.support.pythons``), again only when the dependency list changes; a test that
finds an interpreter without its venv fails and says to run it, never skips.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PREPARED = ROOT / ".tools" / "pythons"
SUPPORTED = ("3.11", "3.12", "3.13")
OWN = f"{sys.version_info.major}.{sys.version_info.minor}"


def _version_of(python: str) -> str | None:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def found() -> dict[str, str]:
    """Supported version → a base interpreter of it on this machine (the venv's for its own)."""
    pythons = {OWN: sys.executable}
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    for version in SUPPORTED:
        if version in pythons:
            continue
        candidates = [shutil.which(f"python{version}") or ""]
        candidates += sorted(
            glob.glob(str(pyenv / "versions" / f"{version}.*/bin/python{version}"))
        )
        for candidate in candidates:
            if candidate and _version_of(candidate) == version:
                pythons[version] = candidate
                break
    return dict(sorted(pythons.items()))


def _dependencies() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"])


def _stamp() -> str:
    return hashlib.sha256("\n".join(_dependencies()).encode()).hexdigest()


def interpreter(version: str) -> str:
    """The interpreter to run wspin under ``version`` with; raises when it is not prepared."""
    if version == OWN:
        return sys.executable
    python = PREPARED / version / "bin" / "python"
    stamp = PREPARED / version / ".wspin-deps"
    if not python.exists() or not stamp.exists() or stamp.read_text() != _stamp():
        raise AssertionError(
            f"Python {version} is installed but has no venv with wspin's dependencies at "
            f"{python.parent.parent}; run `make test` (or `python -m tests.support.pythons`)"
        )
    return str(python)


def prepare() -> None:
    """Build (or refresh) the venv of every supported interpreter found besides this one."""
    for version, base in found().items():
        if version == OWN:
            continue
        folder = PREPARED / version
        stamp = folder / ".wspin-deps"
        if stamp.exists() and stamp.read_text() == _stamp():
            continue
        print(f"preparing Python {version} ({base}) under {folder}", flush=True)
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run([base, "-m", "venv", str(folder)], check=True)
        pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "--only-binary=:all:", *_dependencies()], check=True)
        stamp.write_text(_stamp())


if __name__ == "__main__":
    prepare()
