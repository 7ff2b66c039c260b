"""The AdmissionReview request a write to the test API server is judged as, by policies.

Writes are judged at kube-apiserver's validating stage: after the kind's strategy (so a pod
stored with the ImageVolume gate off has already lost its image volumes) and before the
object is stored. ValidatingAdmissionPolicies are evaluated here (``policies``); admission
webhooks are called before, with the same ``request`` (``webhooks``). Every
request comes from one identity, the cluster admin a kubeconfig would
name, since the server does not authenticate, unless it impersonates another with the
``Impersonate-User``/``Impersonate-Group`` headers (as an admin may on a cluster): policies
then see that user, so a test can act as the controller's ServiceAccount or as a tenant.
"""

from __future__ import annotations

import uuid
from contextvars import ContextVar

from tests.kubeapi.kinds import Kind
from wspin.core.objects import Obj

#: Who every request is from (the server has no authentication).
ADMIN = {
    "username": "kubernetes-admin",
    "groups": ["system:masters", "system:authenticated"],
}
#: The user the request being served acts as (the server sets it per request).
CALLER: ContextVar[Obj] = ContextVar("caller", default=ADMIN)


def impersonated(user: str | None, groups: list[str]) -> Obj:
    """The userInfo an impersonating request is judged as (``system:authenticated`` added,
    as kube-apiserver does); the admin when no user is impersonated."""
    if not user:
        return ADMIN
    return {"username": user, "groups": [*groups, "system:authenticated"]}


def review_request(
    kind: Kind,
    operation: str,
    namespace: str,
    obj: Obj | None,
    old: Obj | None,
    *,
    sub: str = "",
    dry_run: bool = False,
) -> Obj:
    """The AdmissionReview ``request`` a webhook or policy sees for this write."""
    meta = (obj or old or {}).get("metadata") or {}
    gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
    resource = {"group": kind.group, "version": kind.version, "resource": kind.plural}
    request: Obj = {
        "uid": str(uuid.uuid4()),
        "kind": gvk,
        "resource": resource,
        "requestKind": gvk,
        "requestResource": resource,
        "name": meta.get("name", ""),
        "namespace": namespace if kind.namespaced else "",
        "operation": operation,
        "userInfo": CALLER.get(),
        "object": obj,
        "oldObject": old,
        "dryRun": dry_run,
    }
    if sub:
        request["subResource"] = request["requestSubResource"] = sub
    return request
