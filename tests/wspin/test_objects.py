"""Depth and equality of decoded JSON at any depth, without recursion."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from wspin.core.objects import nesting_depth, same_json


def chain(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for level in range(levels):
        value = {"a": value} if level % 2 else [value]
    return value


@pytest.mark.parametrize(
    ("value", "depth"),
    [(1, 0), ("x", 0), ({}, 1), ([], 1), ({"a": [1, {"b": {}}]}, 4), ([[], [[]], {}], 3)],
)
def test_the_depth_counts_dicts_and_lists(value: Any, depth: int) -> None:
    assert nesting_depth(value, 10) == depth


def test_the_depth_stops_counting_past_the_limit() -> None:
    assert nesting_depth(chain(1000), 5) == 6


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ({"a": [1, "x", None]}, {"a": [1, "x", None]}, True),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ([1, 2], [2, 1], False),
        ([1], [1, 1], False),
        (1, 1.0, False),
        (1, True, False),
        ({"a": None}, {}, False),
    ],
)
def test_json_values_are_equal_as_their_json_is(first: Any, second: Any, same: bool) -> None:
    assert same_json(first, second) is same
    assert same_json(second, first) is same


def test_values_deeper_than_the_recursion_limit_are_measured_and_compared() -> None:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100)
    try:
        assert nesting_depth(chain(1020), 2000) == 1020
        assert same_json(chain(1020), chain(1020))
        assert not same_json(chain(1020), chain(1020, leaf=2))
    finally:
        sys.setrecursionlimit(limit)
