"""values.yaml documents every value where it lives: meaning, default and an example."""

from __future__ import annotations

import re

import pytest

from tests.chart.helm import CHART

KEY = re.compile(r"^(\s*)([A-Za-z0-9]+):(.*)$")


def documented_keys() -> list[tuple[str, bool, str]]:
    """(dotted path, is a leaf, the comment block right above it) for every key."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    stack: list[tuple[int, str]] = []
    found = []
    for index, line in enumerate(lines):
        match = KEY.match(line)
        if not match:
            continue
        indent = len(match.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = [key for _, key in stack] + [match.group(2)]
        stack.append((indent, match.group(2)))
        block: list[str] = []
        above = index - 1
        while above >= 0 and lines[above].strip().startswith("#"):
            block.insert(0, lines[above].strip())
            above -= 1
        found.append((".".join(path), match.group(3).strip() != "", " ".join(block)))
    return found


KEYS = [k for k in documented_keys() if ".resources." not in k[0]]  # requests/limits shape


def test_values_yaml_has_keys_to_check() -> None:
    assert len(KEYS) > 80


@pytest.mark.parametrize(("path", "leaf", "comment"), KEYS, ids=[k[0] for k in KEYS])
def test_every_value_has_a_comment_with_its_default_and_an_example(
    path: str, leaf: bool, comment: str
) -> None:
    assert comment, f"{path} has no comment"
    if leaf:
        assert "Default" in comment, f"{path}: the comment does not give the default"
        assert "Example" in comment or "e.g." in comment, f"{path}: no example"


def test_every_value_is_declared_in_the_values_schema() -> None:
    import json

    schema = json.loads((CHART / "values.schema.json").read_text())
    for path, _, _ in KEYS:
        node = schema
        for part in path.split("."):
            assert part in node.get("properties", {}), f"{path} is not in values.schema.json"
            node = node["properties"][part]
