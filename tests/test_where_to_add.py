"""docs/where-to-add.md names only what exists: every path (a bare file name is read in the
repository's root or beside the path before it in the same item), every ``<placeholder>``
path matches a file, every ``make`` target is in the Makefile, every code name is found in a
file its item names, and every quoted section is a heading of a Markdown file its item names.
So the guide fails as soon as the tree moves under it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "where-to-add.md"
SECTIONS = (
    "A pod admission check",
    "A Workspace spec field",
    "A cloud driver for relay VMs",
    "A metric with its alert",
    "An HTTP bound",
)
EXTENSIONS = (".py", ".yaml", ".yml", ".json", ".md", ".toml", ".tpl")
TOP = {"bench", "certs", "charts", "controller", "docs", "examples", "scripts", "tests"}
TOP |= {"webhook", "wspin"}
"""The repository's top-level folders: a name with a ``/`` is a path when it starts with one
(``pods/status`` and ``/metrics`` are not)."""
IDENTIFIER = re.compile(r"^_?[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+$|^[A-Z][A-Za-z0-9]+$")
"""A code name: snake_case with an underscore, or a capitalised name (``ConnectionLimits``)."""


def items() -> list[tuple[str, str]]:
    """(section, item) for every list item of the guide, continuation lines joined."""
    found: list[tuple[str, str]] = []
    section = ""
    for line in GUIDE.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:]
        elif line.startswith("- "):
            found.append((section, line[2:]))
        elif line.startswith("  ") and found and found[-1][0] == section:
            found[-1] = (section, f"{found[-1][1]} {line.strip()}")
    return found


def _is_path(token: str) -> bool:
    if " " in token:
        return False
    if "/" in token:
        return token.split("/", 1)[0] in TOP
    return token.endswith(EXTENSIONS)


def _exists(token: str, beside: Path | None) -> Path | None:
    """Where ``token`` is (``<placeholder>`` matching any name), or None."""
    pattern = re.sub(r"<[^>]+>", "*", token.rstrip("/"))
    bases = [ROOT] if "/" in token or beside is None else [ROOT, beside]
    for base in bases:
        matches = sorted(base.glob(pattern)) if "*" in pattern else [base / pattern]
        for match in matches:
            if match.exists() and (not token.endswith("/") or match.is_dir()):
                return match
    return None


def _paths(item: str) -> tuple[list[Path], list[str]]:
    """The files and folders ``item`` names, and the names that are not there."""
    found: list[Path] = []
    missing: list[str] = []
    beside: Path | None = None
    for token in re.findall(r"`([^`]+)`", item):
        if token.startswith(".") or not _is_path(token):
            continue
        where = _exists(token, beside)
        if where is None:
            missing.append(token)
            continue
        found.append(where)
        if "/" in token:
            beside = where if where.is_dir() else where.parent
    return found, missing


ITEMS = items()


def test_the_guide_has_its_five_sections_each_with_a_list_of_files() -> None:
    for section in SECTIONS:
        named = [p for s, item in ITEMS if s == section for p in _paths(item)[0]]
        assert len(named) >= 5, f"{section!r} names {len(named)} files"


@pytest.mark.parametrize(("section", "item"), ITEMS, ids=[f"{s}: {i[:40]}" for s, i in ITEMS])
def test_every_file_the_guide_names_exists(section: str, item: str) -> None:
    _, missing = _paths(item)
    assert not missing, f"{section}: {missing} do not exist"


@pytest.mark.parametrize(("section", "item"), ITEMS, ids=[f"{s}: {i[:40]}" for s, i in ITEMS])
def test_every_code_name_is_in_a_file_its_item_names(section: str, item: str) -> None:
    files = [p for p in _paths(item)[0] if p.is_file()]
    names = [t for t in re.findall(r"`([^`]+)`", item) if IDENTIFIER.match(t)]
    if not files:
        assert not names, f"{section}: {names} named with no file to find them in"
        return
    text = "\n".join(p.read_text() for p in files)
    for name in names:
        assert name in text, f"{section}: {name!r} is in none of {[str(p) for p in files]}"


@pytest.mark.parametrize(("section", "item"), ITEMS, ids=[f"{s}: {i[:40]}" for s, i in ITEMS])
def test_every_quoted_section_is_a_heading_of_a_document_its_item_names(
    section: str, item: str
) -> None:
    titles = re.findall(r'"([^"]+)"', item)
    documents = [p for p in _paths(item)[0] if p.suffix == ".md"]
    headings = {
        line.lstrip("#").strip()
        for p in documents
        for line in p.read_text().splitlines()
        if line.startswith("#")
    }
    for title in titles:
        assert title in headings, f"{section}: no heading {title!r} in {documents}"


def test_every_make_target_the_guide_names_is_in_the_makefile() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = re.findall(r"`make ([\w-]+)`", GUIDE.read_text())
    assert targets
    for target in targets:
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), target


def test_the_readme_links_the_guide() -> None:
    assert "docs/where-to-add.md" in (ROOT / "README.md").read_text()
