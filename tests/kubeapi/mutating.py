"""Mutating admission of pod creates, as kube-apiserver runs it: the stored
MutatingWebhookConfigurations are called over verified HTTPS and their JSON patches applied.

A Service reference is resolved through ``routes`` ((namespace, name) → loopback port), the
test's stand-in for the cluster network; the connection verifies the webhook's certificate
against the configuration's ``caBundle`` for ``<service>.<namespace>.svc``, so a stale bundle
fails exactly as it does on a cluster. Only what wspin's webhook configuration uses is
emulated: rules on pods and CREATE, namespace and object selectors with matchLabels and
matchExpressions, failurePolicy, timeoutSeconds and JSONPatch responses. Reinvocation is
not run; validating webhooks (and custom resources' mutating ones) run in ``webhooks``.
"""

from __future__ import annotations

import base64
import json
import ssl
import uuid
from collections.abc import Mapping
from typing import Any

import aiohttp
import jsonpatch

from tests.kubeapi.selectors import selector_matches
from tests.kubeapi.status import ApiError

Obj = dict[str, Any]
Routes = Mapping[tuple[str, str], int]


def _rule_matches(rule: Obj) -> bool:
    def has(field: str, value: str) -> bool:
        listed = rule.get(field) or []
        return value in listed or "*" in listed

    return (
        has("operations", "CREATE")
        and has("apiGroups", "")
        and has("apiVersions", "v1")
        and has("resources", "pods")
    )


def _applies(webhook: Obj, namespace_labels: Mapping[str, str], pod: Obj) -> bool:
    pod_labels = (pod.get("metadata") or {}).get("labels") or {}
    return (
        any(_rule_matches(rule) for rule in webhook.get("rules") or [])
        and selector_matches(webhook.get("namespaceSelector"), namespace_labels)
        and selector_matches(webhook.get("objectSelector"), pod_labels)
    )


async def admit_pod(
    configurations: list[Obj],
    routes: Routes,
    *,
    namespace: str,
    namespace_labels: Mapping[str, str],
    pod: Obj,
    dry_run: bool,
) -> Obj:
    """``pod`` after every matching mutating webhook, in configuration-name order."""
    for configuration in sorted(configurations, key=lambda c: c["metadata"]["name"]):
        for webhook in configuration.get("webhooks") or []:
            if not _applies(webhook, namespace_labels, pod):
                continue
            try:
                answer = await _call(webhook, routes, namespace, pod, dry_run)
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
            if answer.get("patch"):
                ops = json.loads(base64.b64decode(answer["patch"]))
                pod = jsonpatch.apply_patch(pod, ops)
    return pod


class _CallFailed(Exception):
    """The webhook could not be called or answered nonsense (failurePolicy decides)."""


async def _call(webhook: Obj, routes: Routes, namespace: str, pod: Obj, dry_run: bool) -> Obj:
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "name": (pod.get("metadata") or {}).get("name", ""),
        "namespace": namespace,
        "operation": "CREATE",
        "userInfo": {"username": "system:admin", "groups": ["system:masters"]},
        "object": pod,
        "oldObject": None,
        "dryRun": dry_run,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }
    return await call_webhook(webhook, routes, request)


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
