"""The test tree's layout: a test module takes shared helpers from a support module (a
package's ``conftest.py`` for fixtures, ``tests/support/`` or a named module beside the tests
for the rest), never from another test module.

Importing a test module from another runs its module-level code a second time, re-exports its
fixtures into a file pytest collects, and ties one file's tests to another's internals; moving
or renaming a test then breaks tests elsewhere. Every file under ``tests/`` and ``bench/`` is
parsed, so an import inside a function or under ``TYPE_CHECKING`` counts too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TREES = ("tests", "bench")


def module_name(path: Path) -> str:
    """The dotted name ``path`` (relative to the repository) is imported as."""
    parts = list(path.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module a ``from … import`` reads from, relative levels resolved against ``module``."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imported(source: str, module: str, *, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """(line, dotted name) for every module or name an import statement in ``source`` names."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def imports_of_test_modules(
    source: str, module: str, *, is_package: bool = False
) -> list[tuple[int, str]]:
    """The imports in ``source`` that name one of our test modules (or a test in one): a name
    in ``tests`` or ``bench`` whose last component starts with ``test_``."""
    found = []
    for line, name in imported(source, module, is_package=is_package):
        parts = name.split(".")
        if parts[0] in TREES and parts[-1].startswith("test_"):
            found.append((line, name))
    return sorted(set(found))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from tests.chart.test_notes import render_notes", "tests.chart.test_notes"),
        ("import tests.chart.test_notes", "tests.chart.test_notes"),
        ("from tests.chart import test_notes", "tests.chart.test_notes"),
        ("from .test_notes import render_notes", "tests.chart.test_notes"),
        ("from . import test_notes", "tests.chart.test_notes"),
        ("from ..webhook.test_validate import create", "tests.webhook.test_validate"),
        ("def f() -> None:\n    from tests.test_readme import README", "tests.test_readme"),
        ("from bench.test_speed import CASES", "bench.test_speed"),
    ],
)
def test_an_import_of_a_test_module_is_found_in_every_form(source: str, expected: str) -> None:
    found = imports_of_test_modules(source, "tests.chart.test_hook")
    assert expected in {name for _, name in found}, found
    assert {line for line, _ in found} == {source.count("\n") + 1}


@pytest.mark.parametrize(
    "source",
    [
        "from tests.chart.notes import render_notes",
        "from tests.chart import conftest, helm",
        "from . import support",
        "from aiohttp.test_utils import TestClient",
    ],
)
def test_imports_of_support_modules_and_other_packages_pass(source: str) -> None:
    assert imports_of_test_modules(source, "tests.chart.test_hook") == []


def test_a_package_resolves_its_relative_imports_from_itself() -> None:
    found = imports_of_test_modules("from .test_a import x", "tests.chart", is_package=True)
    assert found == [(1, "tests.chart.test_a")]


def test_no_module_under_tests_or_bench_imports_a_test_module() -> None:
    offences = []
    files = sorted(path for tree in TREES for path in (REPO / tree).rglob("*.py"))
    assert len(files) > 100, "the test tree was not found"
    for path in files:
        relative = path.relative_to(REPO)
        found = imports_of_test_modules(
            path.read_text(),
            module_name(relative),
            is_package=path.name == "__init__.py",
        )
        offences += [f"{relative}:{line} imports {name}" for line, name in found]
    assert offences == [], (
        "a test module's helpers belong in a support module (fixtures in the package's "
        "conftest.py):\n" + "\n".join(offences)
    )
