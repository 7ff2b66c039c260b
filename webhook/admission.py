"""Admission policy glue: an AdmissionReview ``request`` dict in, a ``Decision`` out.

Pure apart from reading the request: the HTTP edge (``webhook/http.py``) decodes and times,
the policies (``inject.py``, ``validate.py``) decide. Errors become responses here and
nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from webhook import responses
from webhook.inject import InjectConfig, Injection, inject
from webhook.tenant_quota import MemberWorkspaces, QuotaLimits, TenantUsage, quota_problem
from webhook.validate import ValidatorConfig, validate_workspace
from wspin.core.errors import AdmissionDenied
from wspin.core.owners import ANNOTATION_VERIFIED_OWNER, TrustedWriters, decide_owner
from wspin.core.tenancy import NamespaceLabels

ReviewResult = Literal["patched", "allowed", "denied", "error"]


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__, and a
# Decision is built for every review.
@dataclass(slots=True)
class Decision:
    """What was decided, for the response, the log line and the metrics."""

    response: responses.Response
    outcome: ReviewResult
    message: str
    injection: Injection | None = None


def _cut_name(text: str) -> str:
    """A caller-supplied name for a message: at most 253 characters (a name's limit)."""
    return responses.cut(text, 253)


def _name(request: dict[str, Any]) -> str:
    """``request.name`` is absent for generateName creates: fall back to the prefix.

    Only strings are shown, cut short: the name goes into messages and the log line.
    """
    name = request.get("name")
    if isinstance(name, str) and name:
        return _cut_name(name)
    pod = request.get("object")
    metadata = pod.get("metadata") if isinstance(pod, dict) else None
    if not isinstance(metadata, dict):
        return "<unnamed>"
    name, prefix = metadata.get("name"), metadata.get("generateName")
    if isinstance(name, str) and name:
        return _cut_name(name)
    return _cut_name(f"{prefix if isinstance(prefix, str) else ''}<generated>")


def review_pod(request: dict[str, Any], cfg: InjectConfig) -> Decision:
    """Inject delivery into a workspace pod on CREATE; every other operation passes untouched."""
    uid = str(request.get("uid", ""))
    operation = request.get("operation")
    if operation != "CREATE":
        shown_op = responses.cut(operation, 16) if isinstance(operation, str) else "operation"
        message = f"{shown_op} of pod {_name(request)}: delivery is injected on CREATE only"
        return Decision(responses.allowed(uid, message), "allowed", message)
    pod = request.get("object")
    if not isinstance(pod, dict):
        message = "request.object is missing or not a Pod"
        return Decision(responses.denied(uid, message, 400), "denied", message)
    try:
        injection = inject(pod, cfg)
    except AdmissionDenied as denial:
        return Decision(responses.denied(uid, str(denial), denial.code), "denied", str(denial))
    if injection.skipped:
        message = f"pod {_name(request)}: {injection.skipped}; left unchanged"
        return Decision(responses.allowed(uid, message), "allowed", message, injection)
    if not injection.changed:
        message = f"pod {_name(request)}: delivery already wired and recorded; nothing to change"
        return Decision(
            responses.allowed(uid, message, injection.warnings), "allowed", message, injection
        )
    message = f"pod {_name(request)}: injected {cfg.digests}"
    response = responses.patched(uid, message, injection.patch_json(), injection.warnings)
    return Decision(response, "patched", message, injection)


def review_workspace(
    request: dict[str, Any],
    cfg: ValidatorConfig,
    catalogue: Mapping[str, Any] | None = None,
    namespaces: NamespaceLabels | None = None,
    members: MemberWorkspaces | None = None,
) -> Decision:
    """Validate a Workspace CREATE or UPDATE (main endpoint or the status subresource)."""
    uid = str(request.get("uid", ""))
    problem = validate_workspace(request, cfg, catalogue, namespaces, members)
    if problem:
        return Decision(responses.denied(uid, problem), "denied", problem)
    message = f"workspace {_name(request)}: valid"
    return Decision(responses.allowed(uid, message), "allowed", message)


_ANNOTATION_PATH = "/metadata/annotations/" + ANNOTATION_VERIFIED_OWNER.replace("/", "~1")


def owner_record_patch(workspace: dict[str, Any], record: str | None) -> list[dict[str, Any]]:
    """JSON patch ops that leave ``workspace`` carrying exactly ``record`` (None: no record)."""
    meta = workspace.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if not isinstance(annotations, dict):
        if record is None:
            return []
        value = {ANNOTATION_VERIFIED_OWNER: record}
        if not isinstance(meta, dict):
            return [{"op": "add", "path": "/metadata", "value": {"annotations": value}}]
        return [{"op": "add", "path": "/metadata/annotations", "value": value}]
    current = annotations.get(ANNOTATION_VERIFIED_OWNER)
    if current == record:
        return []
    if record is None:
        return [{"op": "remove", "path": _ANNOTATION_PATH}]
    return [{"op": "add", "path": _ANNOTATION_PATH, "value": record}]


def review_workspace_owner(request: dict[str, Any], writers: TrustedWriters) -> Decision:
    """Write the verified owner onto a Workspace CREATE or UPDATE (``wspin.core.owners``).

    Never denies: a write whose owner is refused is left as it is, and the validator, which
    runs after every mutation, denies it with the reason."""
    uid = str(request.get("uid", ""))
    workspace = request.get("object")
    if (
        request.get("operation") not in ("CREATE", "UPDATE")
        or request.get("subResource")
        or not isinstance(workspace, dict)
    ):
        message = f"workspace {_name(request)}: no owner to record"
        return Decision(responses.allowed(uid, message), "allowed", message)
    decision = decide_owner(request, writers)
    if decision.problem is not None:
        message = f"workspace {_name(request)}: owner refused; the validator denies it"
        return Decision(responses.allowed(uid, message), "allowed", message)
    record = decision.record.encode() if decision.record is not None else None
    ops = owner_record_patch(workspace, record)
    if not ops:
        message = f"workspace {_name(request)}: owner record already as verified"
        return Decision(responses.allowed(uid, message), "allowed", message)
    shown = "vouched" if decision.record is not None and decision.record.vouched else "own"
    message = f"workspace {_name(request)}: owner recorded ({shown if record else 'none'})"
    return Decision(responses.patched(uid, message, orjson.dumps(ops)), "patched", message)


def review_tenant_quota(
    request: dict[str, Any], limits: QuotaLimits, usage: TenantUsage
) -> Decision:
    """Check a workspace pod CREATE against its tenant's (or vouched owner's) quota, from the
    watch's view alone: the answer changes nothing another review sees."""
    uid = str(request.get("uid", ""))
    problem = quota_problem(request, limits, usage)
    if problem:
        return Decision(responses.denied(uid, problem), "denied", problem)
    message = f"pod {_name(request)}: within its tenant's quota"
    return Decision(responses.allowed(uid, message), "allowed", message)
