"""Org suspension through the Workspace reconciler, against a fake API service on loopback.

A Workspace in a namespace of a suspended organisation (the namespace's ``llmsafespaces.dev/org``
label, set by the platform) loses its pod and keeps its volume, with reason OrgSuspended and
one Event; it comes back when the organisation is active again; an API service that fails
changes nothing. ``spec.owner.orgID`` is the tenant's own word and decides nothing (runs
unchanged on a real cluster).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from controller.workspace.reconcile.orgstatus import OrgStatusCache, OrgStatusMetrics
from controller.workspace.reconcile.reconciler import ORG_SUSPENDED
from tests.controller.workspace.conftest import Harness
from tests.controller.workspace.orgs import FakeApiService
from tests.support.clock import FakeClock
from wspin.core.kinds import EVENTS, PODS, PVCS, WORKSPACES
from wspin.core.tenancy import LABEL_ORG

TOKEN = "internal-token-for-org-tests"


@pytest.fixture
async def service() -> AsyncIterator[tuple[FakeApiService, str]]:
    fake = FakeApiService()
    app = web.Application()
    app.router.add_get("/api/v1/internal/orgs/{org}/status", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield fake, f"http://127.0.0.1:{port}"
    await runner.cleanup()


@pytest.fixture
async def orgs(
    harness: Harness, service: tuple[FakeApiService, str]
) -> AsyncIterator[tuple[FakeApiService, FakeClock]]:
    fake, url = service
    clock = FakeClock()
    async with aiohttp.ClientSession() as session:
        cache = OrgStatusCache(
            session,
            url,
            TOKEN,
            OrgStatusMetrics(CollectorRegistry()),
            timeout=1.0,
            clock=clock.monotonic,
        )
        harness.use(orgs=cache)
        yield fake, clock
        await cache.close()


async def pod_exists(harness: Harness) -> bool:
    return (
        await harness.kube.get_or_none(PODS, await harness.pod_name(), harness.namespace)
        is not None
    )


async def org_events(harness: Harness) -> int:
    listing = await harness.kube.list(EVENTS, harness.namespace)
    return sum(1 for e in listing["items"] if e.get("reason") == ORG_SUSPENDED)


async def test_a_suspended_org_stops_the_pod_keeps_the_volume_and_resumes(
    harness: Harness, orgs: tuple[FakeApiService, FakeClock]
) -> None:
    fake, clock = orgs
    fake.statuses["org-1"] = "active"
    await harness.label_namespace({LABEL_ORG: "org-1"})
    await harness.apply(owner={"userID": "u1", "orgID": "org-1"})
    requeue = await harness.reconcile()
    assert await pod_exists(harness)
    assert requeue is not None and requeue.after == pytest.approx(30.0)

    fake.statuses["org-1"] = "suspended"
    clock.advance(30)
    await harness.reconcile()
    await harness.reconcile()
    ws = await harness.workspace()
    assert ws["status"]["phase"] == "Suspended"
    assert ws["status"]["reason"] == ORG_SUSPENDED
    assert "organisation org-1 is suspended" in ws["status"]["message"]
    assert not await pod_exists(harness)
    pvc = ws["status"]["pvcName"]
    assert await harness.kube.get_or_none(PVCS, pvc, harness.namespace) is not None
    assert await org_events(harness) == 1
    assert TOKEN not in str(ws)

    fake.fail = 503  # the API service goes down: the last known status holds
    clock.advance(30)
    await harness.reconcile()
    assert (await harness.workspace())["status"]["phase"] == "Suspended"
    assert not await pod_exists(harness)

    fake.fail = 0
    fake.statuses["org-1"] = "active"
    clock.advance(30)
    await harness.reconcile()
    assert (await harness.workspace())["status"]["phase"] == "Resuming"
    await harness.reconcile()
    assert await pod_exists(harness)
    ws = await harness.workspace()
    assert ws["status"]["phase"] != "Suspended" and "reason" not in ws["status"]
    assert await org_events(harness) == 1


async def test_spec_suspend_keeps_an_active_orgs_workspace_suspended(
    harness: Harness, orgs: tuple[FakeApiService, FakeClock]
) -> None:
    fake, _ = orgs
    fake.statuses["org-1"] = "active"
    await harness.label_namespace({LABEL_ORG: "org-1"})
    await harness.apply(owner={"orgID": "org-1"}, suspend=True)
    await harness.reconcile()
    assert not await pod_exists(harness)
    assert "reason" not in (await harness.workspace())["status"]
    assert fake.calls == []  # a user's own suspension needs no lookup


async def test_an_unreachable_api_service_with_nothing_known_changes_nothing(
    harness: Harness, orgs: tuple[FakeApiService, FakeClock]
) -> None:
    fake, _ = orgs
    fake.fail = 500
    await harness.label_namespace({LABEL_ORG: "org-1"})
    await harness.apply(owner={"orgID": "org-1"})
    await harness.reconcile()
    assert await pod_exists(harness)


async def test_workspaces_without_an_org_are_never_looked_up(
    harness: Harness, orgs: tuple[FakeApiService, FakeClock]
) -> None:
    fake, _ = orgs
    await harness.apply(owner={"userID": "u1"})
    await harness.reconcile()
    assert await pod_exists(harness) and fake.calls == []


async def test_the_workspaces_own_org_id_is_not_trusted(
    harness: Harness, orgs: tuple[FakeApiService, FakeClock]
) -> None:
    """A tenant of a suspended organisation naming an active one (or none) stays suspended;
    one naming a suspended organisation in an unlabelled namespace is not stopped by it."""
    fake, _ = orgs
    fake.statuses["org-suspended"] = "suspended"
    fake.statuses["org-active"] = "active"
    await harness.apply(owner={"userID": "u1", "orgID": "org-suspended"}, vouched=False)
    await harness.reconcile()
    assert await pod_exists(harness) and fake.calls == []

    await harness.label_namespace({LABEL_ORG: "org-suspended"})
    await harness.kube.patch(
        WORKSPACES, "ws1", {"spec": {"owner": {"orgID": "org-active"}}}, harness.namespace
    )
    await harness.settle()
    await harness.reconcile()
    await harness.reconcile()
    ws = await harness.workspace()
    assert ws["status"]["phase"] == "Suspended" and ws["status"]["reason"] == ORG_SUSPENDED
    assert "organisation org-suspended is suspended" in ws["status"]["message"]


async def test_a_vouched_owners_org_is_checked_in_a_namespace_of_no_org(
    harness: Harness, orgs: tuple[FakeApiService, FakeClock]
) -> None:
    """The platform API's Workspaces share one unlabelled namespace: each is stopped by the
    suspension of the organisation a trusted writer named for it, and only that one."""
    fake, _ = orgs
    fake.statuses["org-suspended"] = "suspended"
    fake.statuses["org-active"] = "active"
    await harness.apply("ws1", owner={"userID": "u1", "orgID": "org-suspended"})
    await harness.apply("ws2", owner={"userID": "u2", "orgID": "org-active"})
    for name in ("ws1", "ws2", "ws1", "ws2"):
        await harness.reconcile(name)
    stopped, running = await harness.workspace("ws1"), await harness.workspace("ws2")
    assert stopped["status"]["phase"] == "Suspended"
    assert stopped["status"]["reason"] == ORG_SUSPENDED
    assert running["status"].get("reason") != ORG_SUSPENDED
