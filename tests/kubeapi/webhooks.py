"""Admission webhooks for custom resources, as kube-apiserver calls them: every matching
MutatingWebhookConfiguration entry (configuration-name order, JSON patches applied), then every
matching ValidatingWebhookConfiguration entry on the mutated object, for CREATE and UPDATE of
the main resource (not its subresources). The review carries the caller's userInfo (the admin,
or whoever the request impersonates). Only what wspin's configurations use is emulated: rules by
group, version, resource and operation; namespace and object selectors; failurePolicy;
JSONPatch answers. Reinvocation is not run.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import jsonpatch

from tests.kubeapi.kinds import Kind
from tests.kubeapi.mutating import Routes, _CallFailed, call_webhook
from tests.kubeapi.review import review_request
from tests.kubeapi.selectors import selector_matches
from tests.kubeapi.status import ApiError

Obj = dict[str, Any]


def _rule_matches(rule: Obj, kind: Kind, operation: str) -> bool:
    def has(field: str, value: str) -> bool:
        listed = rule.get(field) or []
        return value in listed or "*" in listed

    return (
        has("operations", operation)
        and has("apiGroups", kind.group)
        and has("apiVersions", kind.version)
        and has("resources", kind.plural)
    )


def matching(configurations: list[Obj], kind: Kind, operation: str) -> list[Obj]:
    """The webhooks of ``configurations`` whose rules match, in configuration-name order."""
    found = []
    for configuration in sorted(configurations, key=lambda c: c["metadata"]["name"]):
        for webhook in configuration.get("webhooks") or []:
            if any(_rule_matches(r, kind, operation) for r in webhook.get("rules") or []):
                found.append(webhook)
    return found


async def admit(
    mutating: list[Obj],
    validating: list[Obj],
    routes: Routes,
    *,
    kind: Kind,
    operation: str,
    namespace: str,
    namespace_labels: Mapping[str, str],
    obj: Obj,
    old: Obj | None,
    dry_run: bool,
) -> Obj:
    """``obj`` after mutating admission; ApiError when a webhook denies or cannot be called."""

    def applies(webhook: Obj, current: Obj) -> bool:
        labels = (current.get("metadata") or {}).get("labels") or {}
        return selector_matches(
            webhook.get("namespaceSelector"), namespace_labels
        ) and selector_matches(webhook.get("objectSelector"), labels)

    for phase, webhooks in (
        ("mutating", matching(mutating, kind, operation)),
        ("validating", matching(validating, kind, operation)),
    ):
        for webhook in webhooks:
            if not applies(webhook, obj):
                continue
            request = review_request(kind, operation, namespace, obj, old, dry_run=dry_run)
            try:
                answer = await call_webhook(webhook, routes, request)
            except _CallFailed as failed:
                if webhook.get("failurePolicy", "Fail") == "Ignore":
                    continue
                raise ApiError(
                    500,
                    f'Internal error occurred: failed calling webhook "{webhook["name"]}": '
                    f"{failed}",
                ) from None
            if not answer.get("allowed"):
                status = answer.get("status") or {}
                code = int(status.get("code") or 400)
                raise ApiError(
                    code if code >= 400 else 400,
                    f'admission webhook "{webhook["name"]}" denied the request: '
                    f"{status.get('message', '')}",
                )
            if phase == "mutating" and answer.get("patch"):
                ops = json.loads(base64.b64decode(answer["patch"]))
                obj = jsonpatch.apply_patch(obj, ops)
    return obj
