"""The admission server over real HTTPS, fed the AdmissionReviews a kube-apiserver v1.32 sent.

Each capture is posted exactly as captured (compact JSON, ``?timeout=10s``); the answer is
checked for the uid echo, the decision, and — for patches — the resulting pod, which must
equal the injector's golden for the same pod.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import gzip
import json
import logging
import zlib
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from tests.webhook.conftest import FIXTURES, LiveWebhook, load_capture

GOLDENS = Path(__file__).parent / "testdata" / "inject"

# capture → (path, allowed, what the patch must produce: a golden case, "receipt", or None)
POD_CAPTURES: dict[str, tuple[bool, str | None]] = {
    "pod-create-workspace.json": (True, "workspace"),
    "pod-create-workspace-dryrun.json": (True, "workspace"),
    "pod-create-workspace-already-injected.json": (True, "workspace-already-injected"),
    "pod-create-workspace-forged-pins.json": (True, "workspace-forged-pins"),
    "pod-create-many-containers.json": (True, "workspace-many-containers"),
    "pod-create-labelled-no-workspace-container.json": (False, None),
    "pod-create-plain.json": (True, None),
    "pod-update-labels.json": (True, None),
    "extra-gate-off-pod-create-with-imagevolume.json": (True, "receipt"),
    "extra-gate-off-pod-update-labels-existing-imagevolume.json": (True, None),
}
WORKSPACE_CAPTURES: dict[str, bool] = {
    "workspace-create.json": True,
    "workspace-create-with-status.json": True,
    "workspace-update-spec.json": True,
    "workspace-update-status-subresource.json": True,
    "extra-workspace-create-dryrun.json": True,
    "extra-workspace-create-with-status-validating-stage.json": True,
    "extra-workspace-create-with-status-mutating-stage.json": False,
    "extra-workspace-update-status-via-main-endpoint.json": True,
    "extra-workspace-update-status-only-noop-via-main-endpoint.json": True,
}


def test_every_capture_is_covered() -> None:
    on_disk = {p.name for p in FIXTURES.glob("*.json")}
    assert on_disk == set(POD_CAPTURES) | set(WORKSPACE_CAPTURES)


async def answer_for(webhook: LiveWebhook, body: Any, path: str) -> dict[str, Any]:
    response = await webhook.post(body, path)
    assert response.status == 200, await response.text()
    review: dict[str, Any] = await response.json()
    assert review["apiVersion"] == "admission.k8s.io/v1"
    assert review["kind"] == "AdmissionReview"
    return dict(review["response"])


@pytest.mark.parametrize("capture", sorted(POD_CAPTURES))
async def test_pod_capture_gets_the_expected_answer(webhook: LiveWebhook, capture: str) -> None:
    body = load_capture(capture)
    # Sent compact, as the API server does.
    raw = json.dumps(body, separators=(",", ":")).encode()
    answer = await answer_for(webhook, raw, "/mutate-pods?timeout=10s")
    allowed, expected = POD_CAPTURES[capture]
    assert answer["uid"] == body["request"]["uid"]
    assert answer["allowed"] is allowed
    assert answer["status"]["message"]
    if not allowed:
        assert answer["status"]["code"] == 403
        assert "no container named 'workspace'" in answer["status"]["message"]
        assert "patch" not in answer
        return
    if expected is None:
        assert "patch" not in answer
        return
    assert answer["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(answer["patch"]))
    if expected == "receipt":
        assert [op["path"] for op in ops] == ["/metadata/annotations/llmsafespaces.dev~1delivery"]
        return
    result = jsonpatch.apply_patch(body["request"]["object"], ops)
    golden = (GOLDENS / f"{expected}.yaml.injected").read_text()
    assert yaml.safe_dump(result, sort_keys=True) == golden


async def test_dry_run_gets_the_same_answer_as_a_real_create(webhook: LiveWebhook) -> None:
    real = await answer_for(webhook, load_capture("pod-create-workspace.json"), "/mutate-pods")
    dry = await answer_for(
        webhook, load_capture("pod-create-workspace-dryrun.json"), "/mutate-pods"
    )
    assert dry["patch"] == real["patch"]


async def test_forged_pins_are_replaced_with_warnings(webhook: LiveWebhook) -> None:
    answer = await answer_for(
        webhook, load_capture("pod-create-workspace-forged-pins.json"), "/mutate-pods"
    )
    assert len(answer["warnings"]) == 3
    assert all(len(w) < 256 for w in answer["warnings"])


async def test_generate_name_pods_without_request_name_are_injected(webhook: LiveWebhook) -> None:
    body = copy.deepcopy(load_capture("pod-create-workspace.json"))
    del body["request"]["name"]
    del body["request"]["object"]["metadata"]["name"]
    body["request"]["object"]["metadata"]["generateName"] = "ws1-"
    answer = await answer_for(webhook, body, "/mutate-pods")
    assert answer["allowed"] is True
    assert "ws1-<generated>" in answer["status"]["message"]
    assert answer["patch"]


@pytest.mark.parametrize("capture", sorted(WORKSPACE_CAPTURES))
async def test_workspace_capture_gets_the_expected_verdict(
    webhook: LiveWebhook, capture: str
) -> None:
    body = load_capture(capture)
    answer = await answer_for(webhook, body, "/validate-workspaces?timeout=10s")
    assert answer["uid"] == body["request"]["uid"]
    assert answer["allowed"] is WORKSPACE_CAPTURES[capture]
    assert answer["status"]["message"]
    assert "patch" not in answer


@pytest.mark.parametrize(
    ("method", "headers", "body", "status", "reason"),
    [
        ("GET", {}, b"", 405, "method GET not allowed"),
        ("PUT", {"Content-Type": "application/json"}, b"{}", 405, "method PUT not allowed"),
        ("POST", {"Content-Type": "text/plain"}, b"{}", 415, "content type 'text/plain'"),
        ("POST", {"Content-Type": "application/json"}, b"{not json", 400, "not valid JSON"),
        ("POST", {"Content-Type": "application/json"}, b"[1, 2]", 400, "not a JSON object"),
        (
            "POST",
            {"Content-Type": "application/json"},
            b'{"apiVersion": "v1", "kind": "Pod"}',
            400,
            "expected an admission.k8s.io/v1",
        ),
        (
            "POST",
            {"Content-Type": "application/json"},
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
            400,
            "has no request",
        ),
        (
            "POST",
            {"Content-Type": "application/json"},
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}',
            400,
            "has no uid",
        ),
    ],
)
async def test_bad_requests_get_a_status_and_a_json_reason(
    webhook: LiveWebhook,
    method: str,
    headers: dict[str, str],
    body: bytes,
    status: int,
    reason: str,
) -> None:
    response = await webhook.session.request(
        method,
        webhook.url + "/mutate-pods",
        data=body,
        headers=headers,
        ssl=webhook.trust,
        server_hostname="wspin-webhook.wspin-system.svc",
    )
    assert response.status == status
    answer = await response.json()
    assert reason in answer["error"]


@pytest.mark.parametrize("uid", ["u" * 129, "é" * 65, "x" * (2 * 1024 * 1024)])
async def test_a_uid_longer_than_a_uuid_allows_is_a_400_and_never_echoed(
    webhook: LiveWebhook, uid: str, caplog: pytest.LogCaptureFixture
) -> None:
    review = load_capture("pod-create-workspace.json")
    review["request"]["uid"] = uid
    with caplog.at_level(logging.INFO):
        response = await webhook.post(review)
    assert response.status == 400
    size = len(uid.encode())
    error = (await response.json())["error"]
    assert error == f"request.uid is {size} bytes; a uid is a UUID of at most 128 bytes"
    assert uid not in caplog.text


async def test_a_uid_of_128_bytes_is_answered(webhook: LiveWebhook) -> None:
    review = load_capture("pod-create-workspace.json")
    review["request"]["uid"] = "u" * 128
    answer = await answer_for(webhook, review, "/mutate-pods")
    assert answer["uid"] == "u" * 128


async def test_bodies_over_three_mebibytes_are_refused_with_413(webhook: LiveWebhook) -> None:
    review = load_capture("pod-create-workspace.json")
    review["request"]["object"]["metadata"]["annotations"]["padding"] = "x" * (3 * 1024 * 1024)
    response = await webhook.post(review)
    assert response.status == 413
    assert "exceeds" in (await response.json())["error"]


async def test_server_keeps_serving_after_bad_input(webhook: LiveWebhook) -> None:
    await webhook.post(b"\xff\xfe garbage")
    answer = await answer_for(webhook, load_capture("pod-create-workspace.json"), "/mutate-pods")
    assert answer["allowed"] is True


async def test_probes_answer_on_the_https_port(webhook: LiveWebhook) -> None:
    for path in ("/healthz", "/readyz"):
        response = await webhook.session.get(
            webhook.url + path, ssl=webhook.trust, server_hostname="wspin-webhook.wspin-system.svc"
        )
        assert response.status == 200


async def test_each_decision_is_logged_once_with_its_fields(
    webhook: LiveWebhook, caplog: pytest.LogCaptureFixture
) -> None:
    body = load_capture("pod-create-workspace.json")
    with caplog.at_level(logging.INFO, logger="wspin.webhook"):
        await answer_for(webhook, body, "/mutate-pods")
    decisions = [r for r in caplog.records if getattr(r, "fields", {}).get("decision")]
    assert len(decisions) == 1
    logged = decisions[0].fields  # type: ignore[attr-defined]
    assert logged["uid"] == body["request"]["uid"]
    assert logged["namespace"] == "ws-demo"
    assert logged["name"] == "ws1-1a2b3c4d"
    assert logged["decision"] == "patched"
    assert logged["durationMs"] >= 0


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data)


def _zlib(data: bytes) -> bytes:
    return zlib.compress(data)


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("encoding", "pack"),
    [("gzip", _gzip), ("x-gzip", _gzip), ("deflate", _zlib), ("deflate", _raw_deflate)],
)
async def test_compressed_reviews_get_the_same_answer(
    webhook: LiveWebhook, encoding: str, pack: Any
) -> None:
    raw = json.dumps(load_capture("pod-create-workspace.json")).encode()
    plain = await answer_for(webhook, raw, "/mutate-pods")
    response = await webhook.post(
        pack(raw), headers={"Content-Type": "application/json", "Content-Encoding": encoding}
    )
    assert response.status == 200, await response.text()
    assert (await response.json())["response"]["patch"] == plain["patch"]


GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"  # then an invalid block type
BOMB = gzip.compress(b" " * (3 * 1024 * 1024 + 1))


@pytest.mark.parametrize(
    ("encoding", "body", "status", "reason"),
    [
        ("gzip", GZIP_HEADER + b"\xff\xff\xff\xff", 400, "gzip body is corrupt"),
        ("gzip", _gzip(b'{"a": 1}')[:-6], 400, "gzip body is truncated"),
        ("gzip", _gzip(b"{}") + b"trailing", 400, "data after the end of the gzip stream"),
        ("deflate", b"not deflate at all", 400, "deflate body is corrupt"),
        ("gzip", _gzip(b"\xff\xfe not json"), 400, "not valid JSON"),
        ("gzip", BOMB, 413, "exceeds 3145728 bytes once decompressed"),
        ("br", b"\x0b\x01\x80{}\x03", 415, "content encoding 'br' not supported"),
        ("gzip, gzip", _gzip(_gzip(b"{}")), 415, "not supported; send gzip, deflate or none"),
    ],
)
async def test_bad_compressed_bodies_get_a_4xx_never_a_500(
    webhook: LiveWebhook, encoding: str, body: bytes, status: int, reason: str
) -> None:
    response = await webhook.post(
        body, headers={"Content-Type": "application/json", "Content-Encoding": encoding}
    )
    assert response.status == status
    assert reason in (await response.json())["error"]
    # and the server is still answering
    answer = await answer_for(webhook, load_capture("pod-create-workspace.json"), "/mutate-pods")
    assert answer["allowed"] is True


async def test_a_broken_chunked_body_is_refused_before_its_chunks(webhook: LiveWebhook) -> None:
    port = int(webhook.url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=webhook.trust, server_hostname="wspin-webhook.wspin-system.svc"
    )
    writer.write(
        b"POST /mutate-pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Transfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\nzz-not-a-size\r\n'
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    # Refused from the head, before any chunk is read or any endpoint sees the request.
    assert head.split(b"\r\n")[0].endswith(b" 411 Length Required"), head
    writer.close()
