"""AdmissionReview decoding: the policies get plain dicts, without ``metadata.managedFields``.

The API server writes server-side-apply bookkeeping (``managedFields``) into every object
before admission, and no policy reads it, yet it is about half of every pod review: 4 of the
9 KB of a workspace pod's, 21 of the 41 KB of a pod with many containers, and hundreds of
small dicts each time. msgspec skips it while it parses (the syntax is still checked, nothing
is built), which halves the decode of a review and the garbage it leaves.

The review, the request, its ``object`` and ``oldObject`` and their ``metadata`` are decoded
as structs naming every field of ``admission.k8s.io/v1`` ``AdmissionReview`` and
``AdmissionRequest``, of an object's top level (``apiVersion``, ``kind``, ``metadata``,
``spec``, ``status``: all a pod or a Workspace has) and of ``metav1.ObjectMeta``, and come back
as dicts holding those of their keys the body had: ``managedFields`` is the one field left out,
and a key none of those types has (the API server never sends one) is not kept. A value of
another JSON type than those fields hold (a string where the request belongs) is kept as it
came, for the policies' own checks to refuse: every struct is a union with every other JSON
type. Everything below those levels (the spec, the labels, the user) is decoded as plain JSON.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec
from msgspec import UNSET, Struct, UnsetType

_NOT_AN_OBJECT: TypeAlias = list[Any] | str | int | float | bool | None
"""Every JSON value but an object: what a struct's place may hold instead."""


class _Meta(Struct):
    """``metav1.ObjectMeta`` but ``managedFields``."""

    name: Any = UNSET
    generateName: Any = UNSET
    namespace: Any = UNSET
    selfLink: Any = UNSET
    uid: Any = UNSET
    resourceVersion: Any = UNSET
    generation: Any = UNSET
    creationTimestamp: Any = UNSET
    deletionTimestamp: Any = UNSET
    deletionGracePeriodSeconds: Any = UNSET
    labels: Any = UNSET
    annotations: Any = UNSET
    ownerReferences: Any = UNSET
    finalizers: Any = UNSET


class _Object(Struct):
    """A pod or a Workspace: the five top-level fields of every kind that reaches the
    webhook."""

    apiVersion: Any = UNSET
    kind: Any = UNSET
    metadata: _Meta | _NOT_AN_OBJECT | UnsetType = UNSET
    spec: Any = UNSET
    status: Any = UNSET


_OBJECT: TypeAlias = _Object | _NOT_AN_OBJECT


class _Request(Struct):
    """``admission.k8s.io/v1`` ``AdmissionRequest``."""

    uid: Any = UNSET
    kind: Any = UNSET
    resource: Any = UNSET
    subResource: Any = UNSET
    requestKind: Any = UNSET
    requestResource: Any = UNSET
    requestSubResource: Any = UNSET
    name: Any = UNSET
    namespace: Any = UNSET
    operation: Any = UNSET
    userInfo: Any = UNSET
    object: _OBJECT | UnsetType = UNSET
    oldObject: _OBJECT | UnsetType = UNSET
    dryRun: Any = UNSET
    options: Any = UNSET


class _Review(Struct):
    """``admission.k8s.io/v1`` ``AdmissionReview``."""

    apiVersion: Any = UNSET
    kind: Any = UNSET
    request: _Request | _NOT_AN_OBJECT | UnsetType = UNSET
    response: Any = UNSET


_DECODER = msgspec.json.Decoder(_Review | _NOT_AN_OBJECT)

DecodeError = msgspec.DecodeError
"""Malformed JSON, an integer past 64 bits, or text that is not UTF-8."""


def _plain(struct: Struct) -> dict[str, Any]:
    """The keys the body gave ``struct``, as a dict."""
    return {
        name: value
        for name in struct.__struct_fields__
        if (value := getattr(struct, name)) is not UNSET
    }


def _object(value: Any) -> Any:
    if not isinstance(value, _Object):
        return value
    plain = _plain(value)
    meta = plain.get("metadata")
    if isinstance(meta, _Meta):
        plain["metadata"] = _plain(meta)
    return plain


def decode_review(body: bytes) -> Any:
    """The JSON value of ``body`` with every object as a dict, and the objects under review
    without ``metadata.managedFields``.

    Raises ``DecodeError`` (malformed JSON, see above) or ``RecursionError`` (nested deeper
    than the interpreter's recursion limit)."""
    # JSON text is UTF-8 (RFC 8259), also where nothing is built from it. A review is ASCII
    # unless someone wrote other characters into the object, and the check is then a scan.
    if not body.isascii():
        try:
            body.decode()
        except UnicodeDecodeError as err:
            raise DecodeError(f"the body is not UTF-8 (byte {err.start})") from None
    review = _DECODER.decode(body)
    if not isinstance(review, _Review):
        return review
    plain = _plain(review)
    request = plain.get("request")
    if isinstance(request, _Request):
        inner = plain["request"] = _plain(request)
        if "object" in inner:
            inner["object"] = _object(inner["object"])
        if "oldObject" in inner:
            inner["oldObject"] = _object(inner["oldObject"])
    return plain
