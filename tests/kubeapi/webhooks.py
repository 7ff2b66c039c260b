"""Admission webhooks, as kube-apiserver calls them: every matching
MutatingWebhookConfiguration entry (configuration-name order, JSON patches applied), then every
matching ValidatingWebhookConfiguration entry on the mutated object, for a pod's CREATE and a
custom resource's CREATE and UPDATE (the main resource, not its subresources). The review
carries the caller's userInfo (the admin, or whoever the request impersonates).

A Service reference is resolved through ``routes`` ((namespace, name) → loopback port), the
test's stand-in for the cluster network; the connection verifies the webhook's certificate
against the configuration's ``caBundle`` for ``<service>.<namespace>.svc``, so a stale bundle
fails exactly as it does on a cluster; a ``url`` is called as written. Only what wspin's
configurations use is emulated: rules by group, version, resource and operation; namespace and
object selectors; failurePolicy; timeoutSeconds; JSONPatch answers. Reinvocation is not run.
"""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Mapping

import aiohttp
import jsonpatch

from tests.kubeapi.kinds import Kind
from tests.kubeapi.review import review_request
from tests.kubeapi.selectors import selector_matches
from tests.kubeapi.status import ApiError
from wspin.core.objects import Obj

Routes = Mapping[tuple[str, str], int]


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


class _CallFailed(Exception):
    """The webhook could not be called or answered nonsense (failurePolicy decides)."""


async def call_webhook(webhook: Obj, routes: Routes, request: Obj) -> Obj:
    """POST one AdmissionReview to the webhook as kube-apiserver does: a Service reference
    through ``routes``, or a ``url`` as written; the certificate checked against caBundle."""
    client = webhook.get("clientConfig") or {}
    service = client.get("service") or {}
    timeout = int(webhook.get("timeoutSeconds") or 10)
    trust = ssl.create_default_context()
    bundle = base64.b64decode(client.get("caBundle") or "")
    if bundle:
        trust = ssl.create_default_context(cadata=bundle.decode())
    if client.get("url"):
        url = target = str(client["url"])
        host = str(url.split("//", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0])
    elif service:
        name, svc_ns = service["name"], service["namespace"]
        host = f"{name}.{svc_ns}.svc"
        path = service.get("path") or "/"
        url = f"https://{host}:{service.get('port', 443)}{path}?timeout={timeout}s"
        port = routes.get((svc_ns, name))
        if port is None:
            raise _CallFailed(
                f'failed to call webhook: Post "{url}": no endpoints available for service "{name}"'
            )
        target = f"https://127.0.0.1:{port}{path}?timeout={timeout}s"
    else:
        raise _CallFailed("the webhook has neither a service nor a url")
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
            session.post(
                target,
                json=review,
                ssl=trust,
                server_hostname=host,
            ) as response,
        ):
            if response.status != 200:
                raise _CallFailed(f"failed to call webhook: HTTP {response.status}")
            answer = (await response.json()).get("response")
    except (aiohttp.ClientError, TimeoutError, ValueError, ssl.SSLError) as err:
        raise _CallFailed(f'failed to call webhook: Post "{url}": {err}') from err
    if not isinstance(answer, dict):
        raise _CallFailed("the webhook's answer has no response")
    return answer
