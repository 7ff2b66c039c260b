"""The AdmissionReview request a write to the test API server is judged as, by policies.

Writes are judged at kube-apiserver's validating stage: after the kind's strategy (so a pod
stored with the ImageVolume gate off has already lost its image volumes) and before the
object is stored. Only ValidatingAdmissionPolicies are evaluated (``policies``): webhooks are
not called. Every request comes from one identity, the cluster admin a kubeconfig would
name, since the server does not authenticate.
"""

from __future__ import annotations

import uuid
from typing import Any

from tests.kubeapi.kinds import Kind

Obj = dict[str, Any]

#: Who every request is from (the server has no authentication).
ADMIN = {
    "username": "kubernetes-admin",
    "groups": ["system:masters", "system:authenticated"],
}


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
        "userInfo": ADMIN,
        "object": obj,
        "oldObject": old,
        "dryRun": dry_run,
    }
    if sub:
        request["subResource"] = request["requestSubResource"] = sub
    return request
