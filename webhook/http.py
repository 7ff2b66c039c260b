"""The aiohttp edge of the admission webhooks: transport checks, decoding, timing, logging.

Bad input is answered with a JSON reason and the right status — 405 wrong method, 415 wrong
content type, 413 body over the limit, 400 malformed JSON or not an AdmissionReview — and
never crashes the server or becomes a 500. Routing matches the path only, so the API
server's ``?timeout=10s`` query string is ignored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from webhook import metrics, responses
from webhook.admission import Decision
from wspin.logs import fields

log = logging.getLogger("wspin.webhook")

# The API server caps request bodies at 3 MiB (etcd's 1.5 MiB object limit, doubled for the
# object and oldObject of an UPDATE); anything larger is not a real AdmissionReview.
MAX_BODY_BYTES = 3 * 1024 * 1024

Policy = Callable[[dict[str, Any]], Decision]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class BadRequest(Exception):
    """The HTTP request is not an AdmissionReview we can answer."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _reject(webhook: str, status: int, reason: str, started: float) -> web.Response:
    metrics.record(webhook, "invalid", time.perf_counter() - started)
    log.warning(
        "rejected admission request", extra=fields(webhook=webhook, status=status, reason=reason)
    )
    return web.Response(
        status=status,
        body=orjson.dumps({"error": reason, "status": status}),
        content_type="application/json",
    )


async def read_review(request: web.Request) -> dict[str, Any]:
    """Check transport and envelope; return the review's ``request`` dict."""
    if request.method != "POST":
        raise BadRequest(405, f"method {request.method} not allowed; send POST")
    if request.content_type != "application/json":
        raise BadRequest(
            415, f"content type {request.content_type!r} not supported; send application/json"
        )
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise BadRequest(413, f"body of {request.content_length} bytes exceeds {MAX_BODY_BYTES}")
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge as err:
        raise BadRequest(413, f"body exceeds {MAX_BODY_BYTES} bytes") from err
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise BadRequest(400, f"body is not valid JSON: {err}") from err
    if not isinstance(review, dict):
        raise BadRequest(400, "body is not a JSON object")
    if review.get("apiVersion") != "admission.k8s.io/v1" or review.get("kind") != "AdmissionReview":
        raise BadRequest(
            400,
            "expected an admission.k8s.io/v1 AdmissionReview, got "
            f"apiVersion={review.get('apiVersion')!r} kind={review.get('kind')!r}",
        )
    inner = review.get("request")
    if not isinstance(inner, dict) or not isinstance(inner.get("uid"), str):
        raise BadRequest(400, "AdmissionReview has no request, or the request has no uid")
    return inner


def admission_handler(webhook: str, policy: Policy) -> Handler:
    """An aiohttp handler answering AdmissionReviews with ``policy``; one log line each."""

    async def handle(request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        try:
            inner = await read_review(request)
        except BadRequest as bad:
            return _reject(webhook, bad.status, bad.reason, started)
        try:
            decision = policy(inner)
        except Exception:  # a policy bug must still answer, never a 500 or a dropped socket
            log.exception(
                "admission policy failed", extra=fields(webhook=webhook, uid=inner.get("uid"))
            )
            message = "internal error in the wspin webhook; see its log"
            decision = Decision(responses.denied(inner["uid"], message, 500), "error", message)
        body = orjson.dumps(responses.review(decision.response))
        elapsed = time.perf_counter() - started
        metrics.record(webhook, decision.outcome, elapsed)
        if decision.outcome == "patched" and decision.injection is not None:
            for artifact in _artifacts_patched(decision):
                metrics.INJECTIONS.labels(artifact).inc()
        log.info(
            decision.message,
            extra=fields(
                webhook=webhook,
                uid=inner["uid"],
                namespace=inner.get("namespace", ""),
                name=inner.get("name") or None,
                operation=inner.get("operation"),
                dryRun=bool(inner.get("dryRun")),
                decision=decision.outcome,
                warnings=len(decision.response.get("warnings", ())),
                durationMs=round(elapsed * 1000, 3),
            ),
        )
        return web.Response(body=body, content_type="application/json")

    return handle


def _artifacts_patched(decision: Decision) -> set[str]:
    """Artifacts whose image volume the patch adds or replaces."""
    found: set[str] = set()
    for op in decision.injection.patch if decision.injection else ():
        if op["path"].startswith("/spec/volumes"):
            value = op.get("value")
            volumes = value if isinstance(value, list) else [value]
            found.update(
                str(v.get("name")) for v in volumes if isinstance(v, dict) and "image" in v
            )
    return found & {"agentd", "opencode"}
