"""The three PATCH flavours kube-apiserver picks by Content-Type.

- JSON merge patch (RFC 7386): dicts merge, ``null`` deletes, lists are replaced.
- JSON patch (RFC 6902) through ``jsonpatch``; a failed ``test`` or a bad path is a 422.
- Strategic merge patch, built-in kinds only: like a merge patch, except that lists of
  objects merge by their key (``name`` for containers, volumes, env and the like,
  ``mountPath`` for volumeMounts, ``type`` for conditions, ``uid`` for ownerReferences),
  ``finalizers`` merge as a set, and ``$patch: delete`` removes a list item. kubectl's
  ``$setElementOrder`` and ``$retainKeys`` hints are accepted and ignored.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from tests.kubeapi.status import ApiError, bad_request
from wspin.core.objects import Obj

MERGE = "application/merge-patch+json"
JSON = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"

#: Merge keys of the strategic-merge lists the product touches (from the core/v1 schema).
_MERGE_KEYS = {
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "conditions": "type",
    "ownerReferences": "uid",
    "ports": "containerPort",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}
#: Lists of strings that strategic merge treats as sets.
_SET_LISTS = frozenset({"finalizers"})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 merge of ``patch`` into ``target`` (neither is modified)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: Obj, ops: Any) -> Obj:
    """RFC 6902 ``ops`` applied to ``target``; errors are the 422 kube-apiserver answers."""
    if not isinstance(ops, list):
        raise bad_request(
            "the body of a application/json-patch+json request must be a JSON array of "
            f"operations, got {type(ops).__name__}"
        )
    try:
        result: Obj = jsonpatch.apply_patch(target, ops)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
        raise ApiError(422, f"the JSON patch could not be applied: {err}", "Invalid") from err
    except (TypeError, KeyError, ValueError) as err:
        raise bad_request(f"malformed JSON patch: {err}") from err
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """A strategic merge of ``patch`` into ``target`` (neither is modified)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


def _merge_key(field: str, items: list[Any]) -> str | None:
    if field in _MERGE_KEYS:
        return _MERGE_KEYS[field]
    if items and all(isinstance(i, dict) and "name" in i for i in items):
        return "name"
    return None


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    existing = current if isinstance(current, list) else []
    if field in _SET_LISTS:
        return [*existing, *(v for v in patch if v not in existing)]
    key = (
        _merge_key(field, [*existing, *patch]) if any(isinstance(i, dict) for i in patch) else None
    )
    if key is None:
        return copy.deepcopy(patch)
    merged = [copy.deepcopy(i) for i in existing]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise bad_request(f"strategic merge patch: every item of {field} needs {key!r}")
        at = next((n for n, old in enumerate(merged) if old.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if at is not None:
                del merged[at]
        elif at is None:
            merged.append(strategic_merge_patch({}, item))
        else:
            merged[at] = strategic_merge_patch(merged[at], item)
    return merged
