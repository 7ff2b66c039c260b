"""ValidatingAdmissionPolicies as kube-apiserver v1.32 evaluates them, CEL included.

Used by the test API server (every create, update and delete of a matched resource is judged
by the policies and bindings stored in it) and by the chart tests (the chart's rendered policies
judged against real AdmissionReview captures). The request is the AdmissionReview ``request``
dict a webhook would receive, so the same captures drive both.

What is emulated, from the API server's validating-policy plugin: ``matchConstraints`` and the
binding's ``matchResources`` (resource rules with subresources and ``*``, object selectors
that match when the old or the new object matches, namespace selectors), ``matchConditions``,
``variables`` evaluated in order, ``validations`` with ``message``/``messageExpression`` and
``reason``, ``failurePolicy`` on expression errors, and the answer: the first failing
validation, as ``ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied request:
<message>`` with the code of its reason (Invalid 422 by default, Forbidden 403). Not emulated:
``paramKind``/``paramRef`` (a policy that names params is refused here so no test passes on a
silently skipped check), ``auditAnnotations`` and ``authorizer``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from tests.kubeapi.selectors import selector_matches
from wspin.core.objects import Obj

_CODES = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413}

_ENV = celpy.Environment()


@dataclass(frozen=True)
class Denial:
    """One policy's refusal, as the API server reports it."""

    policy: str
    binding: str
    message: str
    reason: str

    @property
    def code(self) -> int:
        return _CODES.get(self.reason, 422)

    def text(self) -> str:
        return (
            f"ValidatingAdmissionPolicy '{self.policy}' with binding '{self.binding}' denied "
            f"request: {self.message}"
        )


class ExpressionError(Exception):
    """A CEL expression failed to compile or to evaluate."""


@functools.lru_cache(maxsize=512)
def _program(expression: str) -> Any:
    try:
        return _ENV.program(_ENV.compile(expression))
    except CELParseError as err:
        raise ExpressionError(f"compilation failed: {err}") from err


def evaluate(expression: str, activation: dict[str, Any]) -> Any:
    """The CEL value of ``expression`` over ``activation`` (already CEL values)."""
    try:
        result = _program(expression).evaluate(activation)
    except CELEvalError as err:
        raise ExpressionError(str(err.args[0] if err.args else err)) from err
    if isinstance(result, CELEvalError):
        raise ExpressionError(str(result.args[0] if result.args else result))
    return result


# -- matching --------------------------------------------------------------------------------


def _labels(obj: Obj | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


def _rule_matches(rule: Obj, request: Obj) -> bool:
    resource = request.get("resource") or {}
    sub = request.get("subResource") or ""
    operations = rule.get("operations") or []
    if "*" not in operations and request.get("operation") not in operations:
        return False
    groups, versions = rule.get("apiGroups") or [], rule.get("apiVersions") or []
    if "*" not in groups and resource.get("group", "") not in groups:
        return False
    if "*" not in versions and resource.get("version", "") not in versions:
        return False
    for pattern in rule.get("resources") or []:
        base, _, pattern_sub = pattern.partition("/")
        if base not in ("*", resource.get("resource")):
            continue
        # "pods" is the main resource only, "pods/*" its subresources only, "*/*" everything.
        if pattern_sub == sub or (pattern_sub == "*" and (sub or pattern == "*/*")):
            return True
    return False


def resources_match(match: Obj | None, request: Obj, namespace: Obj | None) -> bool:
    """A policy's matchConstraints or a binding's matchResources against the request."""
    if not match:
        return True
    rules = match.get("resourceRules")
    if rules is not None and not any(_rule_matches(r, request) for r in rules):
        return False
    if any(_rule_matches(r, request) for r in match.get("excludeResourceRules") or ()):
        return False
    if request.get("namespace") and not selector_matches(
        match.get("namespaceSelector"), _labels(namespace)
    ):
        return False
    selector = match.get("objectSelector")
    if selector:
        candidates = [o for o in (request.get("object"), request.get("oldObject")) if o]
        if not any(selector_matches(selector, _labels(o)) for o in candidates):
            return False
    return True


# -- evaluation ------------------------------------------------------------------------------


def _activation(request: Obj, namespace: Obj | None) -> dict[str, Any]:
    return {
        "object": json_to_cel(request.get("object")),
        "oldObject": json_to_cel(request.get("oldObject")),
        "request": json_to_cel(request),
        "namespaceObject": json_to_cel(namespace),
        "params": None,
    }


def judge(policy: Obj, binding: Obj, request: Obj, namespace: Obj | None = None) -> Denial | None:
    """The denial ``policy`` under ``binding`` gives ``request``, or None (allowed/unmatched)."""
    spec = policy.get("spec") or {}
    policy_name = str((policy.get("metadata") or {}).get("name", ""))
    binding_name = str((binding.get("metadata") or {}).get("name", ""))
    if spec.get("paramKind") or (binding.get("spec") or {}).get("paramRef"):
        raise NotImplementedError(f"policy {policy_name}: params are not emulated")
    if not resources_match(spec.get("matchConstraints"), request, namespace):
        return None
    if not resources_match((binding.get("spec") or {}).get("matchResources"), request, namespace):
        return None
    fail_closed = spec.get("failurePolicy", "Fail") == "Fail"

    def failed(what: str, err: ExpressionError) -> Denial | None:
        if not fail_closed:
            return None
        return Denial(policy_name, binding_name, f"{what} resulted in error: {err}", "Invalid")

    activation = _activation(request, namespace)
    variables: dict[str, Any] = {}
    activation["variables"] = celtypes.MapType()
    for condition in spec.get("matchConditions") or ():
        try:
            if not bool(evaluate(condition["expression"], activation)):
                return None
        except ExpressionError as err:
            return failed(f"matchCondition {condition.get('name')!r}", err)
    for variable in spec.get("variables") or ():
        try:
            variables[variable["name"]] = evaluate(variable["expression"], activation)
        except ExpressionError as err:
            return failed(f"variable {variable['name']!r}", err)
        activation["variables"] = celtypes.MapType(
            {celtypes.StringType(k): v for k, v in variables.items()}
        )
    for validation in spec.get("validations") or ():
        expression = validation["expression"]
        try:
            passed = evaluate(expression, activation)
        except ExpressionError as err:
            denial = failed(f"expression '{expression}'", err)
            if denial is not None:
                return denial
            continue
        if not isinstance(passed, celtypes.BoolType):
            return failed(f"expression '{expression}'", ExpressionError("the result is not a bool"))
        if passed:
            continue
        message = validation.get("message") or f"failed expression: {expression}"
        if validation.get("messageExpression"):
            # On an error the API server falls back to the static message.
            with contextlib.suppress(ExpressionError):
                message = str(evaluate(validation["messageExpression"], activation))
        return Denial(policy_name, binding_name, message, validation.get("reason") or "Invalid")
    return None


def admit(
    policies: Iterable[Obj], bindings: Iterable[Obj], request: Obj, namespace: Obj | None = None
) -> Denial | None:
    """The first denial any bound policy gives ``request`` (only ``Deny`` bindings refuse)."""
    by_name = {p["metadata"]["name"]: p for p in policies}
    for binding in bindings:
        spec = binding.get("spec") or {}
        policy = by_name.get(spec.get("policyName"))
        if policy is None or "Deny" not in (spec.get("validationActions") or ()):
            continue
        denial = judge(policy, binding, request, namespace)
        if denial is not None:
            return denial
    return None
