"""The webhook's watch-fed views against the API server: the runtime catalogue and Namespace
labels the Workspace validator reads, and the tenant usage the quota reads (runs unchanged on a
real cluster)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.waiting import eventually
from webhook.admission import review_tenant_quota, review_workspace
from webhook.tenant_quota import QuotaLimits
from webhook.validate import ValidatorConfig
from webhook.watches import WatchedViews, quota_view, watched_views
from wspin.core.kinds import NAMESPACES, PODS
from wspin.core.runtimes import RUNTIME_ENVIRONMENTS
from wspin.core.tenancy import LABEL_RUNTIME_CLASS_OVERRIDE, LABEL_TENANT, tenant_of
from wspin.kube.client import Kube

DIGEST = "sha256:" + "cd" * 32
VALIDATOR = ValidatorConfig(allowed_runtime_registries=("ghcr.io/acme/",))


async def running(views: WatchedViews) -> AsyncIterator[WatchedViews]:
    task = asyncio.create_task(views.run())
    try:
        for informer in views.informers:
            await asyncio.wait_for(informer.wait_synced(), 10)
        yield views
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.fixture
async def catalogue_views(kube: Kube) -> AsyncIterator[WatchedViews]:
    async for views in running(watched_views(kube, QuotaLimits())):
        yield views


@pytest.fixture
async def quota_views(kube: Kube) -> AsyncIterator[WatchedViews]:
    limits = QuotaLimits(max_workspaces=2)
    async for views in running(watched_views(kube, limits)):
        yield views


def workspace_create(runtime: str) -> dict[str, Any]:
    return {
        "uid": str(uuid.uuid4()),
        "operation": "CREATE",
        "namespace": "team-a",
        "object": {
            "metadata": {"name": "ws1", "namespace": "team-a"},
            "spec": {"runtime": runtime, "storage": {"size": "10Gi"}},
        },
    }


def workspace_pod(name: str, namespace: str, tenant: str = "acme") -> dict[str, Any]:
    """A workspace pod that claims ``tenant`` in its own label (which decides nothing)."""
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": "llmsafespaces", "component": "workspace", LABEL_TENANT: tenant},
        },
        "spec": {
            "containers": [
                {
                    "name": "workspace",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ]
        },
    }


async def test_a_published_runtime_is_admitted_and_an_unpublished_one_is_denied(
    kube: Kube, catalogue_views: WatchedViews
) -> None:
    name = f"python-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": "llmsafespaces.dev/v1",
        "kind": "RuntimeEnvironment",
        "metadata": {"name": name},
        "spec": {"image": f"ghcr.io/acme/python:3.12@{DIGEST}", "language": "python"},
    }
    before = review_workspace(workspace_create(name), VALIDATOR, catalogue_views.catalogue)
    assert before.outcome == "denied" and "names no RuntimeEnvironment" in before.message
    await kube.create(RUNTIME_ENVIRONMENTS, body)
    try:
        await eventually(lambda: name in catalogue_views.catalogue)
        after = review_workspace(workspace_create(name), VALIDATOR, catalogue_views.catalogue)
        assert after.outcome == "allowed"
    finally:
        await kube.delete(RUNTIME_ENVIRONMENTS, name)
    await eventually(lambda: name not in catalogue_views.catalogue)
    gone = review_workspace(workspace_create(name), VALIDATOR, catalogue_views.catalogue)
    assert gone.outcome == "denied"


@pytest.fixture
async def second_namespace(kube: Kube, real_cluster: bool) -> AsyncIterator[str]:
    name = f"wspin-test-{uuid.uuid4().hex[:10]}"
    await kube.create(NAMESPACES, {"metadata": {"name": name, "labels": {"wspin-test": "1"}}})
    yield name
    if real_cluster:
        await kube.delete(NAMESPACES, name)


async def label_namespace(kube: Kube, namespace: str, labels: dict[str, str]) -> None:
    await kube.patch(NAMESPACES, namespace, {"metadata": {"labels": labels}})


async def test_the_tenants_third_workspace_pod_is_denied_in_any_of_its_namespaces(
    kube: Kube, namespace: str, second_namespace: str, quota_views: WatchedViews
) -> None:
    usage = quota_views.usage
    assert usage is not None and usage.synced
    limits = QuotaLimits(max_workspaces=2)
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    await label_namespace(kube, namespace, {LABEL_TENANT: tenant})
    acme = tenant_of(namespace, {LABEL_TENANT: tenant})
    await eventually(lambda: usage.tenant_of(namespace) == acme)
    for name in ("p1", "p2"):
        await kube.create(PODS, workspace_pod(name, namespace), namespace)
    await eventually(lambda: usage.usage(acme).pods == 2)

    def create(pod: dict[str, Any], where: str = namespace) -> dict[str, Any]:
        return {
            "uid": str(uuid.uuid4()),
            "operation": "CREATE",
            "namespace": where,
            "name": pod["metadata"]["name"],
            "object": pod,
        }

    claims_other = workspace_pod("p3", namespace, "globex")
    third = review_tenant_quota(create(claims_other), limits, usage)
    assert third.outcome == "denied"
    assert "already runs 2 workspace pods; the limit is 2" in third.message
    elsewhere = workspace_pod("q1", second_namespace)
    dry_run = {**create(elsewhere, second_namespace), "dryRun": True}  # nothing reserved
    assert review_tenant_quota(dry_run, limits, usage).outcome == "allowed"
    await label_namespace(kube, second_namespace, {LABEL_TENANT: tenant})
    await eventually(lambda: usage.tenant_of(second_namespace) == acme)
    shared = review_tenant_quota(create(elsewhere, second_namespace), limits, usage)
    assert shared.outcome == "denied"
    await kube.delete(PODS, "p1", namespace)
    await eventually(lambda: usage.usage(acme).pods == 1)
    again = review_tenant_quota(create(workspace_pod("p3", namespace)), limits, usage)
    assert again.outcome == "allowed"


async def test_the_runtime_class_override_follows_the_namespace_label(
    kube: Kube, namespace: str, catalogue_views: WatchedViews
) -> None:
    request = workspace_create("ghcr.io/acme/python:3.12")
    request["namespace"] = namespace
    request["object"]["metadata"]["namespace"] = namespace
    request["object"]["spec"]["runtimeClass"] = "runc"

    def review() -> str:
        decision = review_workspace(
            request, VALIDATOR, catalogue_views.catalogue, catalogue_views.namespaces
        )
        return decision.outcome

    assert review() == "denied"
    await label_namespace(kube, namespace, {LABEL_RUNTIME_CLASS_OVERRIDE: "true"})
    await eventually(lambda: review() == "allowed")


def test_the_cached_pod_keeps_only_what_the_quota_counts() -> None:
    pod = workspace_pod("p", "ns")
    pod["metadata"]["resourceVersion"] = "7"
    pod["metadata"]["annotations"] = {"big": "x" * 10_000}
    pod["spec"]["containers"][0]["env"] = [{"name": "SECRET", "value": "y" * 1000}]
    view = quota_view(pod)
    assert view["metadata"]["resourceVersion"] == "7"
    assert view["spec"]["containers"] == [
        {"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    ]
    assert len(repr(view)) < 400
