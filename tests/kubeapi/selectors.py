"""Label and field selectors with kube-apiserver's grammar and its refusals.

Label selectors support ``=``, ``==``, ``!=``, ``in``, ``notin``, ``key`` and ``!key``;
``!=`` and ``notin`` match objects that lack the label, as on a real server. Field
selectors accept only the fields the kind declares selectable and answer 400 otherwise, so a
test cannot pass here with a selector a real cluster would reject.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from tests.kubeapi.kinds import Kind
from tests.kubeapi.status import bad_request
from wspin.core.objects import Obj

Selector = Callable[[Obj], bool]

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[-A-Za-z0-9_.]*"
_EXISTS = re.compile(rf"^(!?)\s*({_KEY})$")
_EQUALITY = re.compile(rf"^({_KEY})\s*(==|=|!=)\s*({_VALUE})$")
_SET = re.compile(rf"^({_KEY})\s+(in|notin)\s*\(([^)]*)\)$")


def _split(selector: str) -> list[str]:
    """Split on commas that are not inside ``( … )``."""
    parts, depth, current = [], 0, ""
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return [p for p in parts if p]


def _requirement(text: str) -> Selector:
    if m := _SET.match(text):
        key, op = m.group(1), m.group(2)
        values = {v.strip() for v in m.group(3).split(",") if v.strip()}
        if not values:
            raise bad_request(f"unable to parse requirement: {text!r}: values set can't be empty")
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if m := _EQUALITY.match(text):
        key, op, value = m.group(1), m.group(2), m.group(3)
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if m := _EXISTS.match(text):
        negate, key = m.group(1) == "!", m.group(2)
        if negate:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise bad_request(f"unable to parse requirement: {text!r}: found unexpected token")


def label_selector(selector: str | None) -> Selector:
    """A predicate over whole objects for a ``labelSelector`` query value."""
    requirements = [_requirement(part) for part in _split(selector or "")]

    def matches(obj: Obj) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(req(labels) for req in requirements)

    return matches


def _field_value(obj: Obj, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if path == "source" and isinstance(value, dict):
        return str(value.get("component", ""))
    return str(value)


def field_selector(selector: str | None, kind: Kind) -> Selector:
    """A predicate for a ``fieldSelector``; unsupported fields are a 400 like on a cluster."""
    checks: list[tuple[str, bool, str]] = []
    for part in _split(selector or ""):
        m = re.match(r"^([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)$", part)
        if not m:
            raise bad_request(f"invalid field selector: {part!r}: expected field=value")
        name, op, value = m.group(1), m.group(2), m.group(3).strip()
        if name not in kind.selectable_fields:
            raise bad_request(
                f"field label not supported: {name} (for {kind.plural}, use one of "
                f"{', '.join(sorted(kind.selectable_fields))})"
            )
        checks.append((name, op != "!=", value))

    def matches(obj: Obj) -> bool:
        return all((_field_value(obj, name) == value) is equal for name, equal, value in checks)

    return matches


def selector_matches(selector: Obj | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector against a label map; an absent or empty selector matches all."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or ():
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True
