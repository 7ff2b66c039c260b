"""Kubernetes ``Status`` bodies: every error the test API server answers carries one.

Reasons, codes and message shapes follow kube-apiserver, so client code that branches on
``reason`` (``Conflict`` versus ``AlreadyExists``) or on the message behaves as on a cluster.
"""

from __future__ import annotations

from wspin.core.objects import Obj

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def reason_for(code: int) -> str:
    """The ``reason`` kube-apiserver pairs with an HTTP status code."""
    return _REASONS.get(code, "Unknown")


class ApiError(Exception):
    """A request the server refuses; rendered as a ``Status`` body with the same code."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str = "",
        details: Obj | None = None,
        *,
        metadata: Obj | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or reason_for(code)
        self.details = details
        self.metadata = metadata or {}

    def status(self) -> Obj:
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.metadata),
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(plural: str, group: str, name: str) -> Obj:
    details: Obj = {"name": name, "kind": plural}
    if group:
        details["group"] = group
    return details


def _resource(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, f'{_resource(plural, group)} "{name}" not found', details=_details(plural, group, name)
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'{_resource(plural, group)} "{name}" already exists',
        "AlreadyExists",
        _details(plural, group, name),
    )


def conflict(plural: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {_resource(plural, group)} "{name}": {why}',
        "Conflict",
        _details(plural, group, name),
    )


def stale(plural: str, group: str, name: str) -> ApiError:
    return conflict(
        plural,
        group,
        name,
        "the object has been modified; please apply your changes to the latest version "
        "and try again",
    )


def invalid(kind: str, name: str, field: str, problem: str) -> ApiError:
    return ApiError(422, f'{kind} "{name}" is invalid: {field}: {problem}', "Invalid")


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def expired(message: str) -> ApiError:
    return ApiError(410, message, "Expired")


def success(plural: str, group: str, name: str, uid: str) -> Obj:
    """The body kube-apiserver returns for a deletion of kinds that do not echo the object."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {**_details(plural, group, name), "uid": uid},
    }
