"""The tenant quota's admission cost while the webhook's pod cache holds 10,000 workspace pods.

The baseline is the injector's review of the same workspace pod CREATE, measured in the same
process: both endpoints receive that request, so the ratio says what the quota adds to a
workspace pod's admission. Decoding the review is left out of both (it is the same bytes for
each); deciding and encoding the response are in. The usage is fed the way the informer feeds
it, one ADDED event per pod cut down by ``quota_view``, spread over 100 namespaces labelled for
10 tenants (10 namespaces each, sharing the tenant's quota). A second figure compares the same
review at 100 cached pods: the quota adds one total per namespace of the tenant, so its cost
must not grow with the number of pods. The time spent reading the
pod's own requests (``pod_requests``, the part that is per pod rather than per cache) is shown
beside it.
"""

from __future__ import annotations

import copy
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from bench.table import Row
from tests.fixtures import ADMISSION
from webhook import responses
from webhook.admission import Decision, review_pod, review_tenant_quota
from webhook.demo import DEMO_CONFIG
from webhook.tenant_quota import QuotaLimits, TenantUsage, pod_requests
from webhook.watches import quota_view
from wspin.core.tenancy import LABEL_TENANT, tenant_of

CAPTURE = ADMISSION / "pod-create-workspace.json"
PODS = 10_000
FEW_PODS = 100
NAMESPACES = 100
TENANTS = 10
NAMESPACE = "team-000"
TENANT = "tenant-0"
# Workspace container requests, cycled over the cached pods (the init containers' requests
# come from the capture unchanged).
SIZES = (("250m", "512Mi"), ("500m", "1Gi"), ("1", "2Gi"), ("2", "4Gi"))
# Every limit on and above any tenant's usage, so each review runs all three checks and is
# allowed, as most are.
LIMITS = QuotaLimits(max_workspaces=5_000, max_cpu_millis=10_000_000, max_memory_mi=10_000_000)
WINDOW = 0.2
ROUNDS = 15
BATCH = 50


def _request() -> dict[str, Any]:
    """The captured workspace pod CREATE, in one of the cached namespaces."""
    request: dict[str, Any] = json.loads(CAPTURE.read_text())["request"]
    request["namespace"] = NAMESPACE
    request["object"]["metadata"]["namespace"] = NAMESPACE
    return request


def _tenant(namespace: int) -> str:
    return f"tenant-{namespace % TENANTS}"


def _usage(template: dict[str, Any], pods: int) -> TenantUsage:
    """A synced usage holding ``pods`` running workspace pods shaped like ``template``."""
    specs = []
    for cpu, memory in SIZES:
        spec = copy.deepcopy(template["spec"])
        spec["containers"][0]["resources"]["requests"] = {"cpu": cpu, "memory": memory}
        specs.append(spec)
    labels = template["metadata"]["labels"]
    usage = TenantUsage()
    for ns in range(NAMESPACES):
        namespace = {"metadata": {"name": f"team-{ns:03d}", "labels": {LABEL_TENANT: _tenant(ns)}}}
        usage.observe_namespace("ADDED", namespace, None)
    for n in range(pods):
        pod = {
            "metadata": {
                "name": f"ws{n}-0a1b2c3d",
                "namespace": f"team-{n % NAMESPACES:03d}",
                "resourceVersion": str(1000 + n),
                "labels": labels,
            },
            "spec": specs[n % len(specs)],
            "status": {"phase": "Running"},
        }
        usage.apply("ADDED", quota_view(pod), None)
    usage.synced = True
    held = sum(usage.usage(usage.tenant_of(f"team-{t:03d}")).pods for t in range(TENANTS))
    assert held == pods, (held, pods)
    return usage


def _window(fn: Callable[[], object], seconds: float) -> float:
    """Seconds per call of ``fn`` over one window of about ``seconds``."""
    calls, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        for _ in range(BATCH):
            fn()
        calls += BATCH
    return elapsed / calls


def _quantities(pod: dict[str, Any]) -> int:
    spec = pod["spec"]
    containers = spec.get("initContainers", []) + spec.get("containers", [])
    return sum(len(c.get("resources", {}).get("requests", {})) for c in containers)


def _answer(review: Callable[[], Decision]) -> Callable[[], bytes]:
    """What an endpoint does after decoding: decide, then encode the AdmissionReview."""
    return lambda: orjson.dumps(responses.review(review().response))


def bench_tenant_quota() -> list[Row]:
    """The three reviews, and the parsing of the pod's requests alone, alternate in short
    windows and the medians are compared, so drift in the machine's load affects all alike."""
    request = _request()
    many, few = _usage(request["object"], PODS), _usage(request["object"], FEW_PODS)
    reviews: dict[str, Callable[[], Decision]] = {
        "injector": lambda: review_pod(request, DEMO_CONFIG),
        "quota": lambda: review_tenant_quota(request, LIMITS, many),
        "quota-few": lambda: review_tenant_quota(request, LIMITS, few),
    }
    expected = {"injector": "patched", "quota": "allowed", "quota-few": "allowed"}
    for name, review in reviews.items():
        outcome = review().outcome
        assert outcome == expected[name], (name, outcome, review().message)
    tenant_pods = many.usage(tenant_of(NAMESPACE, {LABEL_TENANT: TENANT})).pods
    answers: dict[str, Callable[[], object]] = {
        name: _answer(review) for name, review in reviews.items()
    }
    answers["requests"] = lambda: pod_requests(request["object"])
    for answer in answers.values():  # warm-up
        _window(answer, WINDOW / 3)
    seconds: dict[str, list[float]] = {name: [] for name in answers}
    for _ in range(ROUNDS):
        for name, answer in answers.items():
            seconds[name].append(_window(answer, WINDOW))
    for name, review in reviews.items():  # the measured path stayed the intended one
        assert review().outcome == expected[name], name
    injector, quota, quota_few, requests = (statistics.median(seconds[n]) for n in answers)
    return [
        Row(
            f"tenant-quota review at {PODS:,} workspace pods, vs the injector's review",
            quota / injector,
            "< 1",
            f"{quota * 1e6:,.1f} µs vs {injector * 1e6:,.0f} µs per workspace pod CREATE "
            f"(decide + encode; {requests * 1e6:,.0f} µs of it summing the pod's "
            f"{_quantities(request['object'])} request quantities; the tenant holds "
            f"{tenant_pods} pods in its {NAMESPACES // TENANTS} namespaces; "
            f"medians of {ROUNDS} alternating {WINDOW:g} s windows)",
        ),
        Row(
            f"tenant-quota review at {PODS:,} vs {FEW_PODS} workspace pods",
            quota / quota_few,
            "≈ 1",
            f"{quota * 1e6:,.1f} µs vs {quota_few * 1e6:,.1f} µs per review "
            f"(at {FEW_PODS} pods {quota_few / injector:.3f} of the injector's)",
        ),
    ]
