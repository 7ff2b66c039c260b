"""The repository stands alone: a fresh clone collects the whole suite without reading a file
outside itself (captures, charts and helpers all ship in the repository).

The clone is of the committed HEAD, so a file that exists only in a working tree, or a test
that reaches for data beside the repository, fails here rather than on a newcomer's machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Runs inside the clone: collects the suite while an audit hook records every file opened,
# then reports the collection result, the opened paths and where our packages were loaded from.
_COLLECT = r"""
import json, os, sys
opened = set()
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        opened.add(os.path.realpath(os.fsdecode(args[0])))
sys.addaudithook(hook)
import pytest
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider"])
ours = ("wspinctl", "wspin", "webhook", "controller", "certs", "tests", "bench")
modules = {
    name: getattr(module, "__file__", None) or ""
    for name, module in list(sys.modules.items())
    if name.split(".")[0] in ours
}
print("\n@@" + json.dumps({"code": int(code), "opened": sorted(opened), "modules": modules}))
"""


def _allowed_roots(clone: Path) -> list[Path]:
    """The clone itself, the Python installation running it (stdlib and site-packages), the
    system directories, and the temporary directory (tempfile probes it; the clone is in it)."""
    roots = {clone, Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)}
    roots.add(Path(tempfile.gettempdir()))
    roots |= {Path(p) for p in ("/usr", "/etc", "/dev", "/proc", "/sys", "/lib", "/lib64")}
    return [root.resolve() for root in roots]


def test_a_fresh_clone_collects_the_whole_suite_without_reading_outside_itself(
    tmp_path: Path,
) -> None:
    clone = tmp_path / "wspin"
    subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(clone)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert any((clone / "tests" / "fixtures" / "admission").iterdir())
    proc = subprocess.run(
        [sys.executable, "-c", _COLLECT],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=300,
        # The clone's own directory comes first on the path, as `python -m pytest` there has it.
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(clone), "HOME": str(tmp_path)},
    )
    assert "@@" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout.rsplit("@@", 1)[1])
    summary = proc.stdout.rsplit("@@", 1)[0].strip().splitlines()[-1:]
    assert report["code"] == 0, proc.stdout[-3000:]
    assert "error" not in " ".join(summary), summary
    collected = [line for line in proc.stdout.splitlines() if "::" in line]
    assert len(collected) > 500, summary

    loaded_elsewhere = {
        name: path
        for name, path in report["modules"].items()
        if path and not Path(path).resolve().is_relative_to(clone.resolve())
    }
    assert loaded_elsewhere == {}, "our modules must come from the clone"

    roots = _allowed_roots(clone)
    escaped = [
        path
        for path in report["opened"]
        if not any(Path(path).is_relative_to(root) for root in roots)
        or (Path(path).is_relative_to(REPO) and not Path(path).is_relative_to(Path(sys.prefix)))
    ]
    assert escaped == [], "collection read files outside the clone"
