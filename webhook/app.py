"""The admission port's routes, used by the server, the demo and the tests."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from prometheus_client import CollectorRegistry

from webhook.admission import review_pod, review_tenant_quota, review_workspace
from webhook.http import Endpoint, Reply, Request, admission_endpoint, error_reply
from webhook.inject import InjectConfig
from webhook.metrics import AdmissionMetrics
from webhook.tenant_quota import QuotaLimits
from webhook.validate import ValidatorConfig
from webhook.watches import WatchedViews
from wspin.http.probes import Readiness

MUTATE_PODS_PATH = "/mutate-pods"
VALIDATE_WORKSPACES_PATH = "/validate-workspaces"
VALIDATE_TENANT_QUOTA_PATH = "/validate-pod-tenant-quota"


Routes = dict[str, Endpoint]


def make_app(
    inject_config: InjectConfig,
    validator: ValidatorConfig,
    readiness: Readiness,
    views: WatchedViews | None = None,
    quota: QuotaLimits | None = None,
    *,
    metrics: AdmissionMetrics | None = None,
) -> Routes:
    """``POST /mutate-pods``, ``POST /validate-workspaces``, ``GET /healthz``, ``GET /readyz``,
    and ``POST /validate-pod-tenant-quota`` when a tenant quota is configured. ``views`` holds
    the watch-fed runtime catalogue, Namespace labels and tenant usage (None without API
    access); ``metrics``
    records every answer (None: on a registry of its own, for tests and the demo).
    """
    if metrics is None:
        metrics = AdmissionMetrics(CollectorRegistry())
    routes: Routes = {
        MUTATE_PODS_PATH: admission_endpoint(
            "mutate-pods", partial(review_pod, cfg=inject_config), metrics
        ),
        VALIDATE_WORKSPACES_PATH: admission_endpoint(
            "validate-workspaces",
            partial(
                review_workspace,
                cfg=validator,
                catalogue=views.catalogue if views is not None else None,
                namespaces=views.namespaces if views is not None else None,
            ),
            metrics,
        ),
        "/healthz": _probe(lambda: []),
        "/readyz": _probe(readiness.problems),
    }
    if views is not None and views.usage is not None and quota is not None:
        routes[VALIDATE_TENANT_QUOTA_PATH] = admission_endpoint(
            "validate-pod-tenant-quota",
            partial(review_tenant_quota, limits=quota, usage=views.usage),
            metrics,
        )
    return routes


def _probe(problems: Callable[[], list[str]]) -> Endpoint:
    """``GET``: 200 ``ok`` or 503 with one line per problem (the side port's answers)."""

    def answer(request: Request) -> Reply:
        if request.method != "GET":
            return error_reply(405, f"method {request.method[:16]} not allowed; send GET")
        found = problems()
        if found:
            text = "not ready:\n" + "\n".join(found) + "\n"
            return Reply(503, text.encode(), "text/plain; charset=utf-8")
        return Reply(200, b"ok\n", "text/plain; charset=utf-8")

    return answer
