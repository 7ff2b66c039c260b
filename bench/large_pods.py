"""The admission answer to a huge but legal pod costs what reading it costs: decode, review and
encode of the ``pod-create-workspace`` review grown to thousands of mounts, against
``json.loads`` + ``json.dumps`` of the same bytes, for the four shapes the injector's bounds
are about (``tests/webhook/test_inject_shape.py`` proves what each is answered).

- 12 000 ordinary mounts: allowed, with the delivery patch;
- 6 000 ordinary and 6 000 mounts of ``agentd`` elsewhere: denied at the first;
- 6 000 ordinary and 200 duplicate delivery mounts: allowed, the duplicates removed;
- 6 000 ordinary and 6 000 duplicate delivery mounts: denied before the answer is built.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson

from bench.table import Row
from bench.webhook import CONFIG, _per_call
from tests.fixtures import ADMISSION
from webhook.admission import review_pod
from webhook.envelope import decode_review
from webhook.server import tune_gc_for_admission

CAPTURE = ADMISSION / "pod-create-workspace.json"
SHAPES = (
    ("12 000 mounts", 12_000, 0, 0),
    ("6 000 mounts + 6 000 of agentd elsewhere (denied)", 6_000, 6_000, 0),
    ("6 000 mounts + 200 duplicate delivery mounts", 6_000, 0, 200),
    ("6 000 mounts + 6 000 duplicate delivery mounts (denied)", 6_000, 0, 6_000),
)
GOAL = 2.0
"""At most twice a JSON round trip of the same review: linear in the pod, as the captures."""


def _review(ordinary: int, elsewhere: int, duplicate: int) -> bytes:
    review: dict[str, Any] = copy.deepcopy(json.loads(CAPTURE.read_text()))
    mounts = review["request"]["object"]["spec"]["containers"][0]["volumeMounts"]
    mounts.extend({"name": "workspace", "mountPath": f"/d/{i}"} for i in range(ordinary))
    mounts.extend({"name": "agentd", "mountPath": f"/a/{i}"} for i in range(elsewhere))
    mounts.extend({"name": "agentd", "mountPath": "/agentd"} for _ in range(duplicate))
    return orjson.dumps(review)


def bench_large_pod_reviews() -> list[Row]:
    """One row per shape: the admission answer against a JSON round trip of the review."""
    tune_gc_for_admission()
    rows: list[Row] = []
    for label, ordinary, elsewhere, duplicate in SHAPES:
        raw = _review(ordinary, elsewhere, duplicate)

        def baseline(raw: bytes = raw) -> None:
            json.dumps(json.loads(raw))

        def answer(raw: bytes = raw) -> None:
            decision = review_pod(decode_review(raw)["request"], CONFIG)
            orjson.dumps({"response": decision.response})

        base, whole = _per_call(baseline, 1.0), _per_call(answer, 1.0)
        rows.append(
            Row(
                f"decode + review + encode, {label}, vs json.loads+json.dumps",
                whole / base,
                f"<= {GOAL:g}",
                f"{whole * 1e3:,.1f} ms vs {base * 1e3:,.1f} ms per review ({len(raw):,} bytes)",
            )
        )
    return rows
