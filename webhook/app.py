"""The webhook's aiohttp application factory, used by the server, the demo and the tests."""

from __future__ import annotations

from functools import partial

from aiohttp import web

from webhook.admission import review_pod, review_tenant_quota, review_workspace
from webhook.http import MAX_BODY_BYTES, admission_handler
from webhook.inject import InjectConfig
from webhook.tenant_quota import QuotaLimits
from webhook.validate import ValidatorConfig
from webhook.watches import WatchedViews
from wspin.serving import Readiness, add_probe_routes

MUTATE_PODS_PATH = "/mutate-pods"
VALIDATE_WORKSPACES_PATH = "/validate-workspaces"
VALIDATE_TENANT_QUOTA_PATH = "/validate-pod-tenant-quota"


def make_app(
    inject_config: InjectConfig,
    validator: ValidatorConfig,
    readiness: Readiness,
    views: WatchedViews | None = None,
    quota: QuotaLimits | None = None,
) -> web.Application:
    """``POST /mutate-pods``, ``POST /validate-workspaces``, ``GET /healthz``, ``GET /readyz``,
    and ``POST /validate-pod-tenant-quota`` when a tenant quota is configured. ``views`` holds
    the watch-fed runtime catalogue and tenant usage (None without API access).

    Routes accept every method so a wrong one gets the webhook's JSON 405, not aiohttp's page.
    """
    # One byte over the limit lets the handler tell "too large" from a truncated read.
    app = web.Application(client_max_size=MAX_BODY_BYTES + 1)
    app.router.add_route(
        "*",
        MUTATE_PODS_PATH,
        admission_handler("mutate-pods", partial(review_pod, cfg=inject_config)),
    )
    app.router.add_route(
        "*",
        VALIDATE_WORKSPACES_PATH,
        admission_handler(
            "validate-workspaces",
            partial(
                review_workspace,
                cfg=validator,
                catalogue=views.catalogue if views is not None else None,
            ),
        ),
    )
    if views is not None and views.usage is not None and quota is not None:
        app.router.add_route(
            "*",
            VALIDATE_TENANT_QUOTA_PATH,
            admission_handler(
                "validate-pod-tenant-quota",
                partial(review_tenant_quota, limits=quota, usage=views.usage),
            ),
        )
    add_probe_routes(app, readiness)
    return app
