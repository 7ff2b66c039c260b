"""The admission port's routes, used by the server, the demo and the tests."""

from __future__ import annotations

from functools import partial

from prometheus_client import CollectorRegistry

from webhook.admission import (
    review_pod,
    review_tenant_quota,
    review_workspace,
    review_workspace_owner,
)
from webhook.http import admission_endpoint
from webhook.inject import InjectConfig
from webhook.metrics import AdmissionMetrics
from webhook.tenant_quota import QuotaLimits
from webhook.validate import ValidatorConfig
from webhook.watches import WatchedViews
from wspin.http.messages import Endpoint
from wspin.http.probes import Readiness, probe_routes

MUTATE_PODS_PATH = "/mutate-pods"
VALIDATE_WORKSPACES_PATH = "/validate-workspaces"
MUTATE_WORKSPACES_PATH = "/mutate-workspaces"
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
    """``POST /mutate-pods``, ``POST /mutate-workspaces`` (the verified owner record),
    ``POST /validate-workspaces``, ``GET /healthz``, ``GET /readyz``,
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
        MUTATE_WORKSPACES_PATH: admission_endpoint(
            "mutate-workspaces",
            partial(review_workspace_owner, writers=validator.trusted_writers),
            metrics,
        ),
        VALIDATE_WORKSPACES_PATH: admission_endpoint(
            "validate-workspaces",
            partial(
                review_workspace,
                cfg=validator,
                catalogue=views.catalogue if views is not None else None,
                namespaces=views.namespaces if views is not None else None,
                members=views.members if views is not None else None,
            ),
            metrics,
        ),
        **probe_routes(readiness),
    }
    if views is not None and views.usage is not None and quota is not None:
        routes[VALIDATE_TENANT_QUOTA_PATH] = admission_endpoint(
            "validate-pod-tenant-quota",
            partial(review_tenant_quota, limits=quota, usage=views.usage),
            metrics,
        )
    return routes
