"""AdmissionResponse constructors: every response echoes the uid and carries a message.

Messages and warnings quote what the request carried (a package source, a container's args):
the user and password of any URL in them are replaced before the API server, its audit log
and the client see them, and each is cut to a bound, as the API server cuts warnings itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pybase64 import b64encode_as_string

from wspin.core.redact import strip_url_credentials

Response = dict[str, Any]

MAX_MESSAGE_CHARS = 1024
"""A response's message; a real one is a few hundred characters."""
MAX_WARNING_CHARS = 256
"""One warning: the API server keeps 256 characters of each."""
MAX_WARNINGS = 16
"""Warnings per response: the API server keeps 4 KiB of them in all."""


def cut(text: str, limit: int) -> str:
    """``text``, at most ``limit`` characters, ending in "…" when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _warnings(warnings: Sequence[str]) -> list[str]:
    shown = [cut(strip_url_credentials(w), MAX_WARNING_CHARS) for w in warnings[:MAX_WARNINGS]]
    if len(warnings) > MAX_WARNINGS:
        shown[-1] = f"and {len(warnings) - MAX_WARNINGS + 1} more warnings of the same kind"
    return shown


def _status(message: str, code: int = 200) -> dict[str, Any]:
    return {"code": code, "message": cut(strip_url_credentials(message), MAX_MESSAGE_CHARS)}


def allowed(uid: str, message: str, warnings: Sequence[str] = ()) -> Response:
    response: Response = {"uid": uid, "allowed": True, "status": _status(message)}
    if warnings:
        response["warnings"] = _warnings(warnings)
    return response


def patched(uid: str, message: str, patch_json: bytes, warnings: Sequence[str] = ()) -> Response:
    """Allowed with a JSON patch (``patch_json``: the ops as encoded JSON)."""
    response = allowed(uid, message, warnings)
    response["patchType"] = "JSONPatch"
    # Standard base64, as binascii writes it, in SIMD: a few times faster on a patch of a few
    # kilobytes, and it was the largest single cost of answering a workspace pod.
    response["patch"] = b64encode_as_string(patch_json)
    return response


# The metav1.StatusReason the API server shows beside each code we deny with.
_REASONS = {400: "BadRequest", 403: "Forbidden", 413: "RequestEntityTooLarge"}


def denied(uid: str, message: str, code: int = 403) -> Response:
    return {
        "uid": uid,
        "allowed": False,
        "status": {**_status(message, code), "reason": _REASONS.get(code, "InternalError")},
    }


def review(response: Response) -> dict[str, Any]:
    """Wrap a response in the AdmissionReview envelope the API server expects back."""
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
