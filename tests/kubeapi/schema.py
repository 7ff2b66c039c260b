"""Structural schemas of custom resources: pruning, defaulting and validation on every write.

kube-apiserver (v1.32) treats a CRD version's ``openAPIV3Schema`` as a structural schema: on
create and update it drops every field the schema does not declare (unless the object node
says ``x-kubernetes-preserve-unknown-fields: true``; a declared child of such a node is
pruned by its own schema again), fills in ``default`` values, and answers 422 ``Invalid``
with one ``<path>: <problem>`` per violation. A controller that reads or writes an
undeclared field therefore sees it vanish on a real cluster; this module makes it vanish in
the test server too.

Covered: ``type`` (string, integer, number, boolean, object, array), ``nullable``,
``x-kubernetes-int-or-string``, ``enum``, ``minLength``/``maxLength``, ``pattern``,
``minimum``/``maximum``, ``minItems``/``maxItems``, ``required``, ``properties``,
``additionalProperties`` (a schema for map values), ``items`` and ``default``: the keywords
the chart's CRDs use. ``metadata`` is the server's own and never pruned here.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from wspin.core.objects import Obj

Schema = dict[str, Any]

_ROOT_OWN = frozenset({"apiVersion", "kind", "metadata"})


def prune_and_default(schema: Schema, obj: Obj) -> Obj:
    """``obj`` as the server stores it: undeclared fields dropped, defaults filled in."""
    out = copy.deepcopy(obj)
    for key in list(out):
        if key in _ROOT_OWN:
            continue
        props = schema.get("properties") or {}
        if key in props:
            out[key] = _prune(props[key], out[key])
        elif not schema.get("x-kubernetes-preserve-unknown-fields"):
            del out[key]
    _default(schema, out, root=True)
    return out


def _prune(schema: Schema, value: Any) -> Any:
    if isinstance(value, dict) and (
        schema.get("type") == "object" or "properties" in schema or "additionalProperties" in schema
    ):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        for key in list(value):
            if key in props:
                value[key] = _prune(props[key], value[key])
            elif isinstance(extra, dict):
                value[key] = _prune(extra, value[key])
            elif not preserve:
                del value[key]
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_prune(schema["items"], item) for item in value]
    return value


def _default(schema: Schema, value: Any, *, root: bool = False) -> None:
    if isinstance(value, dict):
        for key, child in (schema.get("properties") or {}).items():
            if root and key in _ROOT_OWN:
                continue
            if key not in value and "default" in child:
                value[key] = copy.deepcopy(child["default"])
            if key in value:
                _default(child, value[key])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default(schema["items"], item)


def violations(schema: Schema, obj: Obj) -> list[str]:
    """Every ``<path>: <problem>`` the schema finds in ``obj``, in kube-apiserver's wording."""
    found: list[str] = []
    props = schema.get("properties") or {}
    for key in schema.get("required") or ():
        if key not in obj:
            found.append(f"{key}: Required value")
    for key, value in obj.items():
        if key in _ROOT_OWN or key not in props:
            continue
        _check(props[key], value, key, found)
    return found


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _quote(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    return _json_type(value) if isinstance(value, dict | list) else str(value).lower()


def _check(schema: Schema, value: Any, path: str, found: list[str]) -> None:
    actual = _json_type(value)
    if value is None:
        if not schema.get("nullable"):
            found.append(
                f'{path}: Invalid value: "null": {path} in body must be of type '
                f'{schema.get("type") or "object"}: "null"'
            )
        return
    if schema.get("x-kubernetes-int-or-string"):
        if actual not in ("integer", "string"):
            found.append(
                f'{path}: Invalid value: "{actual}": {path} in body must be of type '
                f'integer or string: "{actual}"'
            )
            return
    elif "type" in schema:
        wanted = schema["type"]
        ok = actual == wanted or (wanted == "number" and actual == "integer")
        if not ok:
            found.append(
                f'{path}: Invalid value: "{actual}": {path} in body must be of type '
                f'{wanted}: "{actual}"'
            )
            return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_quote(v) for v in schema["enum"])
        found.append(f"{path}: Unsupported value: {_quote(value)}: supported values: {supported}")
    if isinstance(value, str):
        _check_string(schema, value, path, found)
    elif actual in ("integer", "number"):
        _check_number(schema, value, path, found)
    elif isinstance(value, list):
        _check_array(schema, value, path, found)
    elif isinstance(value, dict):
        _check_object(schema, value, path, found)


def _check_string(schema: Schema, value: str, path: str, found: list[str]) -> None:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        found.append(f"{path}: Too long: may not be more than {schema['maxLength']} bytes")
    if "minLength" in schema and len(value) < schema["minLength"]:
        found.append(
            f'{path}: Invalid value: "{value}": {path} in body should be at least '
            f"{schema['minLength']} chars long"
        )
    if "pattern" in schema and not re.search(schema["pattern"], value):
        found.append(
            f"{path}: Invalid value: \"{value}\": {path} in body should match '{schema['pattern']}'"
        )


def _check_number(schema: Schema, value: float, path: str, found: list[str]) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        found.append(
            f"{path}: Invalid value: {value}: {path} in body should be greater than or "
            f"equal to {schema['minimum']}"
        )
    if "maximum" in schema and value > schema["maximum"]:
        found.append(
            f"{path}: Invalid value: {value}: {path} in body should be less than or "
            f"equal to {schema['maximum']}"
        )


def _check_array(schema: Schema, value: list[Any], path: str, found: list[str]) -> None:
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        found.append(
            f"{path}: Too many: {len(value)}: must have at most {schema['maxItems']} items"
        )
    if "minItems" in schema and len(value) < schema["minItems"]:
        found.append(
            f"{path}: Invalid value: {len(value)}: {path} in body should have at least "
            f"{schema['minItems']} items"
        )
    items = schema.get("items")
    if isinstance(items, dict):
        for n, item in enumerate(value):
            _check(items, item, f"{path}[{n}]", found)


def _check_object(schema: Schema, value: Obj, path: str, found: list[str]) -> None:
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key in schema.get("required") or ():
        if key not in value:
            found.append(f"{path}.{key}: Required value")
    for key, child in value.items():
        if key in props:
            _check(props[key], child, f"{path}.{key}", found)
        elif isinstance(extra, dict):
            _check(extra, child, f"{path}[{key}]", found)
