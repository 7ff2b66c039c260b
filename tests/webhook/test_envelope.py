"""The review decoder: what the policies get is the body's JSON with the objects'
``metadata.managedFields`` left out, and, at the levels it names (the review, the request, the
objects' top level), only the fields of those types."""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.webhook.conftest import FIXTURES, LiveWebhook, load_capture
from webhook.envelope import DecodeError, decode_review

_REVIEW = {"apiVersion", "kind", "request", "response"}
_REQUEST = {
    "uid",
    "kind",
    "resource",
    "subResource",
    "requestKind",
    "requestResource",
    "requestSubResource",
    "name",
    "namespace",
    "operation",
    "userInfo",
    "object",
    "oldObject",
    "dryRun",
    "options",
}
_OBJECT = {"apiVersion", "kind", "metadata", "spec", "status"}


def _as_policies_see(review: Any) -> Any:
    if not isinstance(review, dict):
        return review
    expected = {k: v for k, v in copy.deepcopy(review).items() if k in _REVIEW}
    request = expected.get("request")
    if isinstance(request, dict):
        request = expected["request"] = {k: v for k, v in request.items() if k in _REQUEST}
        for key in ("object", "oldObject"):
            obj = request.get(key)
            if isinstance(obj, dict):
                obj = request[key] = {k: v for k, v in obj.items() if k in _OBJECT}
                meta = obj.get("metadata")
                if isinstance(meta, dict):
                    meta.pop("managedFields", None)
    return expected


@pytest.mark.parametrize("capture", sorted(p.name for p in FIXTURES.glob("*.json")))
def test_every_capture_decodes_to_its_json_as_policies_see(capture: str) -> None:
    body = (FIXTURES / capture).read_bytes()
    review = orjson.loads(body)
    decoded = decode_review(body)
    assert decoded == _as_policies_see(review)
    assert decoded == review or "managedFields" in body.decode()


_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8)
_json = st.recursive(
    _scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
_meta_keys = st.sampled_from(
    [
        "name",
        "generateName",
        "namespace",
        "uid",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
        "creationTimestamp",
        "resourceVersion",
        "generation",
    ]
)
_extra = st.dictionaries(st.text(max_size=4), _json, max_size=2)


def _with_extra(fields: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """Dicts of ``fields`` and other keys, or any other JSON value in their place."""
    return st.builds(lambda extra, known: {**extra, **known}, _extra, fields) | _json


_object = _with_extra(
    st.fixed_dictionaries(
        {},
        optional={
            "apiVersion": _json,
            "kind": _json,
            "metadata": st.dictionaries(_meta_keys, _json, max_size=6) | _json,
            "spec": _json,
            "status": _json,
        },
    )
)
_request = _with_extra(
    st.fixed_dictionaries(
        {},
        optional={
            "uid": _json,
            "operation": _json,
            "name": _json,
            "namespace": _json,
            "userInfo": _json,
            "object": _object,
            "oldObject": _object,
            "dryRun": _json,
            "options": _json,
            "subResource": _json,
        },
    )
)
_review = _with_extra(
    st.fixed_dictionaries({}, optional={"apiVersion": _json, "kind": _json, "request": _request})
)


@given(_review)
def test_any_review_decodes_to_its_json_as_policies_see(review: Any) -> None:
    assert decode_review(orjson.dumps(review)) == _as_policies_see(review)


@pytest.mark.parametrize(
    "managed",
    [b"[{]", b'["\xff"]', b'"\\ud800"', b"[" * 100_000 + b"]" * 100_000],
    ids=["malformed", "not-utf8", "lone-surrogate", "nested-100k"],
)
def test_what_is_skipped_must_still_be_json(managed: bytes) -> None:
    body = b'{"request":{"uid":"u","object":{"metadata":{"managedFields":' + managed + b"}}}}"
    with pytest.raises((DecodeError, RecursionError)):
        decode_review(body)


def test_text_that_is_not_utf8_is_refused_wherever_it_is() -> None:
    with pytest.raises(DecodeError, match="not UTF-8"):
        decode_review(b'{"unknown":"\xc3"}')
    assert decode_review('{"name":"é"}'.encode()) == {}  # unknown keys of the envelope
    assert decode_review('{"request":{"name":"é"}}'.encode()) == {"request": {"name": "é"}}


@pytest.mark.parametrize(
    ("managed", "reason"),
    [
        (b"[{]", "not valid JSON"),
        (b'["\xff"]', "not valid JSON"),
        (b"[" * 50_000 + b"]" * 50_000, "nested too deeply"),
    ],
)
async def test_a_broken_managed_fields_is_a_400(
    webhook: LiveWebhook, managed: bytes, reason: str
) -> None:
    review = load_capture("pod-create-workspace.json")
    review["request"]["object"]["metadata"]["managedFields"] = "MANAGED"
    body = json.dumps(review).encode().replace(b'"MANAGED"', managed)
    response = await webhook.session.post(
        webhook.url + "/mutate-pods",
        data=body,
        headers={"Content-Type": "application/json"},
        ssl=webhook.trust,
        server_hostname="wspin-webhook.wspin-system.svc",
    )
    assert response.status == 400
    assert reason in (await response.json())["error"]
    assert (await webhook.post(load_capture("pod-create-workspace.json"))).status == 200
