"""The admission endpoints' edge: transport checks, decoding, timing, logging.

Bad input is answered with a JSON reason and the right status — 405 wrong method, 415 wrong
content type or content encoding, 413 body over the limit (after decompression), 400 a body
that cannot be decompressed or decoded, or is not an AdmissionReview — and never crashes the
server or becomes a 500. Endpoints are plain functions from a whole ``Request`` to a
``Reply`` (``wspin.http.messages``): the server frames, bounds and times out requests, and
routes by path only, so the API server's ``?timeout=10s`` is ignored.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Callable
from typing import Any

import orjson

from webhook import responses
from webhook.admission import Decision
from webhook.envelope import DecodeError, decode_review
from webhook.metrics import AdmissionMetrics
from wspin.core.logs import fields, info_line
from wspin.http.limits import ConnectionLimits
from wspin.http.messages import Endpoint, Reply, Request, error_reply

log = logging.getLogger("wspin.webhook")

# The server refuses a larger body before it arrives; the same bound applies once decompressed.
MAX_BODY_BYTES = ConnectionLimits().max_body_bytes
MAX_UID_BYTES = 128
"""The longest review uid answered: the API server sends a UUID (36 characters), and the uid
is logged and echoed, so a longer one is refused with 400 rather than written anywhere."""

Policy = Callable[[dict[str, Any]], Decision]


class BadRequest(Exception):
    """The HTTP request is not an AdmissionReview we can answer."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _reject(
    record: Callable[[str, float], None],
    webhook: str,
    bad: BadRequest,
    started: float,
    quiet: bool,
) -> Reply:
    record("invalid", time.perf_counter() - started)
    if not quiet:
        log.warning(
            "rejected admission request",
            extra=fields(webhook=webhook, status=bad.status, reason=bad.reason),
        )
    return error_reply(bad.status, bad.reason)


# Content-Encoding → zlib's window bits. "deflate" is zlib-wrapped by the HTTP spec; a raw
# deflate stream (what some clients send) is recognised by its missing zlib header.
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def decode_body(body: bytes, encoding: str) -> bytes:
    """The body with its Content-Encoding undone, the size limit applied to the result."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return body
    wbits = _WBITS.get(name)
    if wbits is None:
        raise BadRequest(
            415,
            f"content encoding {encoding[:40]!r} not supported; send gzip, deflate or none",
        )
    if name == "deflate" and not (len(body) > 1 and (body[0] * 256 + body[1]) % 31 == 0):
        wbits = -zlib.MAX_WBITS
    inflater = zlib.decompressobj(wbits)
    try:
        decoded = inflater.decompress(body, MAX_BODY_BYTES + 1)
    except zlib.error as err:
        raise BadRequest(400, f"{name} body is corrupt: {err}") from err
    if len(decoded) > MAX_BODY_BYTES:
        raise BadRequest(413, f"body exceeds {MAX_BODY_BYTES} bytes once decompressed")
    if not inflater.eof:
        raise BadRequest(400, f"{name} body is truncated")
    if inflater.unused_data:
        raise BadRequest(400, f"data after the end of the {name} stream")
    return decoded


def media_type(content_type: str) -> str:
    """``application/json; charset=utf-8`` → ``application/json``."""
    return content_type.split(";", 1)[0].strip().lower()


def read_review(request: Request) -> dict[str, Any]:
    """Check transport and envelope; return the review's ``request`` dict."""
    if request.method != "POST":
        raise BadRequest(405, f"method {request.method[:16]} not allowed; send POST")
    content_type = request.content_type
    if content_type != "application/json":  # as the API server sends it, else parsed
        content_type = media_type(content_type)
    if content_type != "application/json":
        raise BadRequest(
            415,
            f"content type {content_type[:80]!r} not supported; send application/json",
        )
    body = request.body
    encoding = request.content_encoding
    if encoding is not None:
        body = decode_body(body, encoding)
    try:
        review = decode_review(body)
    except DecodeError as err:
        raise BadRequest(400, f"body is not valid JSON: {err}") from err
    except RecursionError as err:
        raise BadRequest(400, "body is nested too deeply to be a Kubernetes object") from err
    if not isinstance(review, dict):
        raise BadRequest(400, "body is not a JSON object")
    if review.get("apiVersion") != "admission.k8s.io/v1" or review.get("kind") != "AdmissionReview":
        raise BadRequest(
            400,
            "expected an admission.k8s.io/v1 AdmissionReview, got "
            f"apiVersion={_short(review.get('apiVersion'))} kind={_short(review.get('kind'))}",
        )
    inner = review.get("request")
    if not isinstance(inner, dict) or not isinstance(inner.get("uid"), str):
        raise BadRequest(400, "AdmissionReview has no request, or the request has no uid")
    if len(inner["uid"]) > MAX_UID_BYTES // 4 and len(inner["uid"].encode()) > MAX_UID_BYTES:
        raise BadRequest(
            400,
            f"request.uid is {len(inner['uid'].encode())} bytes; a uid is a UUID of at most "
            f"{MAX_UID_BYTES} bytes",
        )
    return inner


def _text(value: object) -> str | None:
    """A request field for the log line: strings only, at most 253 characters."""
    return value[:253] if isinstance(value, str) else None


def _short(value: object) -> str:
    """A caller's value for an error message: repr, at most 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def admission_endpoint(webhook: str, policy: Policy, metrics: AdmissionMetrics) -> Endpoint:
    """An endpoint answering AdmissionReviews with ``policy``; one log line and one
    ``metrics`` record each."""

    record = metrics.recorder(webhook)

    def handle(request: Request) -> Reply:
        started = time.perf_counter()
        try:
            inner = read_review(request)
        except BadRequest as bad:
            return _reject(record, webhook, bad, started, request.quiet)
        try:
            decision = policy(inner)
        except Exception:  # a policy bug must still answer, never a 500 or a dropped socket
            if not request.quiet:
                log.exception(
                    "admission policy failed",
                    extra=fields(webhook=webhook, uid=_text(inner["uid"])),
                )
            message = "internal error in the wspin webhook; see its log"
            decision = Decision(responses.denied(inner["uid"], message, 500), "error", message)
        try:
            body = orjson.dumps(responses.review(decision.response))
        except orjson.JSONEncodeError:  # only caller-supplied strings reach it; still answer
            message = "the answer for this request could not be encoded"
            decision = Decision(responses.denied(inner["uid"], message, 400), "denied", message)
            body = orjson.dumps(responses.review(decision.response))
        elapsed = time.perf_counter() - started
        record(decision.outcome, elapsed)
        if decision.outcome == "patched" and decision.injection is not None:
            metrics.injected(decision.injection.artifacts)
        if request.quiet:
            return Reply(200, body)
        info_line(
            log,
            responses.cut(decision.message, responses.MAX_MESSAGE_CHARS),
            dict(
                webhook=webhook,
                uid=_text(inner["uid"]),
                namespace=_text(inner.get("namespace")) or "",
                name=_text(inner.get("name")) or None,
                operation=_text(inner.get("operation")),
                dryRun=bool(inner.get("dryRun")),
                decision=decision.outcome,
                warnings=len(decision.response.get("warnings", ())),
                durationMs=round(elapsed * 1000, 3),
            ),
        )
        return Reply(200, body)

    return handle
