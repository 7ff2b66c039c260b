"""What an informer caches: compacted, shared between objects, read-only, bounded."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from tests.fixtures import ADMISSION
from tests.support.sharing import containers, unshared_equal_subtrees
from wspin.core.objects import Obj
from wspin.kube.compaction import CachedDict, CachedList, Compactor


def captured_pod() -> Obj:
    review = json.loads((ADMISSION / "pod-create-workspace-already-injected.json").read_text())
    pod: Obj = review["request"]["object"]
    return pod


def renamed(pod: Obj, suffix: str) -> Obj:
    """``pod`` decoded anew (as every watch event is) under a name of its own."""
    name = pod["metadata"]["name"]
    decoded: Obj = json.loads(json.dumps(pod).replace(name, name + suffix))
    return decoded


def test_compacting_keeps_every_field_but_managed_fields() -> None:
    pod = captured_pod()
    assert "managedFields" in pod["metadata"], "the capture must include managedFields"
    compacted = Compactor()(copy.deepcopy(pod))
    del pod["metadata"]["managedFields"]
    assert compacted == pod
    assert orjson.dumps(compacted) == orjson.dumps(pod), "key order and every value kept"


def test_two_pods_decoded_apart_share_every_subtree_they_have_in_common() -> None:
    compactor = Compactor()
    pod = captured_pod()
    first, second = compactor(renamed(pod, "-a")), compactor(renamed(pod, "-b"))
    assert first != second
    assert unshared_equal_subtrees(first, second) == []
    assert compactor.shared > 0


def test_keys_and_short_strings_are_one_object_across_pods() -> None:
    compactor = Compactor()
    pod = captured_pod()
    first, second = compactor(renamed(pod, "-a")), compactor(renamed(pod, "-b"))
    key_a = next(iter(first["metadata"]))
    key_b = next(iter(second["metadata"]))
    assert key_a is key_b
    assert first["metadata"]["namespace"] is second["metadata"]["namespace"]


def test_values_that_compare_equal_across_types_are_not_merged() -> None:
    compactor = Compactor()
    objects = [compactor({"v": [value], "w": {"x": value}}) for value in (1, True, 1.0, "1")]
    assert [json.dumps(o) for o in objects] == [
        '{"v": [1], "w": {"x": 1}}',
        '{"v": [true], "w": {"x": true}}',
        '{"v": [1.0], "w": {"x": 1.0}}',
        '{"v": ["1"], "w": {"x": "1"}}',
    ]


def test_the_order_of_keys_is_kept_and_differently_ordered_dicts_stay_apart() -> None:
    compactor = Compactor()
    ab = compactor({"m": {"a": 1, "b": 2}})
    ba = compactor({"m": {"b": 2, "a": 1}})
    assert list(ab["m"]) == ["a", "b"]
    assert list(ba["m"]) == ["b", "a"]


WRITES: list[tuple[str, Callable[[Any], object]]] = [
    ("set", lambda d: d.__setitem__("spec", {})),
    ("delete", lambda d: d.__delitem__("spec")),
    ("setdefault", lambda d: d.setdefault("new", 1)),
    ("pop", lambda d: d.pop("spec")),
    ("popitem", lambda d: d.popitem()),
    ("update", lambda d: d.update({"new": 1})),
    ("merge in place", lambda d: d.__ior__({"new": 1})),
    ("clear", lambda d: d.clear()),
    ("append", lambda d: d["spec"]["containers"].append({})),
    ("extend", lambda d: d["spec"]["containers"].extend([{}])),
    ("insert", lambda d: d["spec"]["containers"].insert(0, {})),
    ("remove", lambda d: d["spec"]["containers"].remove(d["spec"]["containers"][0])),
    ("pop item", lambda d: d["spec"]["containers"].pop()),
    ("sort", lambda d: d["spec"]["containers"].sort()),
    ("reverse", lambda d: d["spec"]["containers"].reverse()),
    ("set index", lambda d: d["spec"]["containers"].__setitem__(0, {})),
    ("delete index", lambda d: d["spec"]["containers"].__delitem__(0)),
    ("add in place", lambda d: d["spec"]["containers"].__iadd__([{}])),
    ("nested set", lambda d: d["spec"]["containers"][0].__setitem__("image", "evil")),
]


@pytest.mark.parametrize(("write", "attempt"), WRITES, ids=[name for name, _ in WRITES])
def test_every_write_to_a_cached_object_is_refused(
    write: str, attempt: Callable[[Any], object]
) -> None:
    compactor = Compactor()
    pod = captured_pod()
    cached, other = compactor(renamed(pod, "-a")), compactor(renamed(pod, "-b"))
    before = copy.deepcopy(other)
    with pytest.raises(TypeError, match="read-only: change a copy"):
        attempt(cached)
    assert other == before, f"{write} reached another cached object"


def test_copies_of_a_cached_object_are_ordinary_and_writable() -> None:
    cached = Compactor()(captured_pod())
    made = copy.deepcopy(cached)
    assert made == cached
    assert all(type(c) in (dict, list) for c in containers(made))
    made["spec"]["containers"][0]["image"] = "changed"
    assert cached["spec"]["containers"][0]["image"] != "changed"
    for shallow in (copy.copy(cached), dict(cached), cached.copy(), {**cached}):
        assert type(shallow) is dict
        shallow["spec"] = {}
    listed = cached["spec"]["containers"]
    for made_list in (list(listed), listed[:], copy.copy(listed), [*listed]):
        assert type(made_list) is list
        made_list.append({})


def test_every_dict_and_list_of_a_cached_object_is_read_only() -> None:
    cached = Compactor()(captured_pod())
    found = containers(cached)
    assert found
    assert all(isinstance(c, CachedDict | CachedList) for c in found)


def test_cached_objects_encode_as_the_objects_they_came_from() -> None:
    pod = captured_pod()
    del pod["metadata"]["managedFields"]
    cached = Compactor()(copy.deepcopy(pod))
    assert json.dumps(cached) == json.dumps(pod)
    assert orjson.dumps(cached) == orjson.dumps(pod)


def test_the_compactor_remembers_a_bounded_number_of_subtrees() -> None:
    compactor = Compactor(limit=64)
    common = {"securityContext": {"runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}}
    objects = [
        compactor({"metadata": {"name": f"o{i}", "labels": {"i": str(i)}}, "spec": common})
        for i in range(500)
    ]
    assert len(compactor) <= 64
    # A subtree every object has is met on every object and so never forgotten.
    assert all(o["spec"] is objects[0]["spec"] for o in objects)


def test_an_object_as_deep_as_the_json_decoders_allow_is_compacted_without_recursion() -> None:
    # A Workspace's spec keeps undeclared fields, so its owner decides its depth; orjson and
    # the API server accept about 1,024 levels. A recursive compactor needs a call a level,
    # which Python 3.12 refuses past its recursion limit: with the limit at 200 here, every
    # Python version would refuse it.
    steps = 680  # 1,020 levels: a dict, then a dict holding a list, in turn
    nested: Obj = {"leaf": [1, "two", None]}
    for step in range(steps):
        nested = {"a": nested} if step % 2 else {"b": [nested]}
    workspace: Obj = {"metadata": {"name": "deep"}, "spec": {"x": nested}}
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        compacted = Compactor()(workspace)
    finally:
        sys.setrecursionlimit(limit)
    node, depth = compacted["spec"]["x"], 0
    while "leaf" not in node:  # walked, not compared: == recurses too
        assert isinstance(node, CachedDict)
        if "a" in node:
            node = node["a"]
        else:
            assert isinstance(node["b"], CachedList)
            node = node["b"][0]
        depth += 1
    assert depth == steps
    assert node["leaf"] == [1, "two", None]
    assert isinstance(node["leaf"], CachedList)
