"""Admission refusals, worded and coded as kube-apiserver v1.32 answers them.

The test server runs no admission chain; a test that needs a create refused by a policy
registers a ``Denial`` (``KubeServer.deny_creates``) and the server answers matching creates,
dry runs included (validating admission runs for them too), with the Status body a real API
server sends. The shapes, from ``k8s.io/apiserver``:

- ValidatingAdmissionPolicy (``plugin/policy/validating``): ``admission.NewForbidden`` with
  the message ``ValidatingAdmissionPolicy '<p>' with binding '<b>' denied request: <msg>``,
  then reason and code replaced by the validation's ``reason`` (default ``Invalid``, 422),
  and the message repeated as the one cause.
- A validating webhook (``plugin/webhook/errors.ToStatusErr``): the webhook's own status
  with the message prefixed ``admission webhook "<name>" denied the request: ``, code 403
  when the webhook set none, details naming the object.
- Pod Security admission: 403 Forbidden, ``pods "<name>" is forbidden: violates PodSecurity
  "<level>:<version>": <what>``.

Creates of a generateName object are refused under the generated name: the name is set before
validating admission runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tests.kubeapi.status import ApiError, reason_for
from wspin.core.objects import Obj


@dataclass
class Denial:
    """Refuse the next ``count`` creates under ``path`` (a REST path prefix) as ``source``."""

    source: Literal["policy", "webhook", "pod-security"]
    name: str
    """The policy (and its binding), the webhook, or the Pod Security level
    (``restricted:latest``)."""
    message: str
    path: str = "/"
    count: int = 1
    code: int = 0
    """0: the source's default (422 for a policy, 403 otherwise)."""

    def matches(self, path: str) -> bool:
        return self.count > 0 and path.startswith(self.path)

    def error(self, plural: str, group: str, object_name: str) -> ApiError:
        resource = f"{plural}.{group}" if group else plural
        details: Obj = {"name": object_name, "kind": plural}
        if group:
            details["group"] = group
        if self.source == "policy":
            cause = (
                f"ValidatingAdmissionPolicy '{self.name}' with binding '{self.name}' "
                f"denied request: {self.message}"
            )
            code = self.code or 422
            details["causes"] = [{"message": cause}]
            return ApiError(
                code, f'{resource} "{object_name}" is forbidden: {cause}', reason_for(code), details
            )
        if self.source == "webhook":
            code = self.code or 403
            message = f'admission webhook "{self.name}" denied the request: {self.message}'
            return ApiError(code, message, reason_for(code), details)
        return ApiError(
            self.code or 403,
            f'{resource} "{object_name}" is forbidden: violates PodSecurity "{self.name}": '
            f"{self.message}",
            "Forbidden",
            details,
        )
