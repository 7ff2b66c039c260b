"""``spec.suspend`` as a request the controller consumes, against the Kubernetes API.

``true`` suspends, ``false`` resumes, absent is no request. The status is committed before the
field is removed; every request is removed in the phase it reaches, so a stray value never
fires later; a value written meanwhile is never cleared unseen.
"""

from __future__ import annotations

import pytest

from controller.types import Requeue
from controller.workspace.reconcile.deadlines import MIN_REQUEUE
from controller.workspace.reconcile.suspension import clear_request, consumed
from tests.controller.workspace.conftest import Harness
from tests.controller.workspace.factories import ready_pod_status, reconcile_until
from tests.kubeapi import KubeServer
from wspin.core.kinds import PODS, WORKSPACES


async def request(h: Harness, value: bool | None) -> None:
    live = await h.kube.patch(WORKSPACES, "ws1", {"spec": {"suspend": value}}, h.namespace)
    await h.synced(h.workspaces, "ws1", live)


async def active(h: Harness) -> str:
    await h.apply()
    await h.reconcile()
    name = await h.pod_name()
    await h.set_pod_status(name, ready_pod_status())
    await h.reconcile()
    assert (await h.workspace())["status"]["phase"] == "Active"
    return name


async def pod_uid(h: Harness, name: str) -> str | None:
    pod = await h.kube.get_or_none(PODS, name, h.namespace)
    return None if pod is None else str(pod["metadata"]["uid"])


@pytest.mark.parametrize(
    ("phase", "value", "cleared"),
    [
        ("Pending", True, True),
        ("Active", True, True),
        ("Active", False, True),  # already running: consumed, nothing else
        ("Suspended", False, True),
        ("Suspended", True, True),  # already suspended: consumed, nothing else
        ("Suspending", True, True),
        ("Suspending", False, False),  # acted on once Suspended
        ("Terminating", True, False),
        ("Terminated", False, False),
        ("Active", None, False),
    ],
)
def test_which_requests_a_phase_consumes(phase: str, value: bool | None, cleared: bool) -> None:
    assert consumed(phase, value) is cleared


async def test_suspend_while_active_goes_through_suspending_and_is_consumed(
    harness: Harness,
) -> None:
    name = await active(harness)
    await request(harness, True)
    await harness.reconcile()
    ws = await harness.workspace()
    assert ws["status"]["phase"] == "Suspending"
    assert "suspend" not in ws["spec"]
    assert "podIP" not in ws["status"] and "endpoint" not in ws["status"]
    pod = await harness.kube.get_or_none(PODS, name, harness.namespace)
    assert pod is None or pod["metadata"].get("deletionTimestamp")
    ws = await reconcile_until(harness, "Suspended")
    assert ws["status"]["suspendedAt"] == "2026-11-29T12:00:00Z"


async def test_suspend_before_the_first_pod_runs_goes_straight_to_suspended(
    harness: Harness,
) -> None:
    await harness.apply(suspend=True)
    await harness.reconcile()
    ws = await harness.workspace()
    assert ws["status"]["phase"] == "Suspended" and "suspend" not in ws["spec"]
    assert await pod_uid(harness, await harness.pod_name()) is None


async def test_resume_shows_resuming_then_builds_a_pod(harness: Harness) -> None:
    await harness.apply(suspend=True)
    await harness.reconcile()
    await request(harness, False)
    await harness.reconcile()
    ws = await harness.workspace()
    assert ws["status"]["phase"] == "Resuming"
    assert "suspend" not in ws["spec"] and "suspendedAt" not in ws["status"]
    assert await pod_uid(harness, await harness.pod_name()) is None  # not in the same pass
    await harness.reconcile()
    assert (await harness.workspace())["status"]["phase"] == "Creating"
    assert await pod_uid(harness, await harness.pod_name()) is not None


async def test_a_stray_resume_while_active_is_consumed_and_never_undoes_a_later_suspend(
    harness: Harness,
) -> None:
    name = await active(harness)
    before = await pod_uid(harness, name)
    await request(harness, False)
    await harness.reconcile()
    ws = await harness.workspace()
    assert ws["status"]["phase"] == "Active" and "suspend" not in ws["spec"]
    assert await pod_uid(harness, name) == before
    await request(harness, True)
    await reconcile_until(harness, "Suspended")
    for _ in range(2):
        await harness.reconcile()
    assert (await harness.workspace())["status"]["phase"] == "Suspended"


async def test_a_stray_suspend_while_suspended_is_consumed_and_never_undoes_a_resume(
    harness: Harness,
) -> None:
    await harness.apply(suspend=True)
    await harness.reconcile()
    await request(harness, True)
    await harness.reconcile()
    assert "suspend" not in (await harness.workspace())["spec"]
    await request(harness, False)
    await harness.reconcile()
    await harness.reconcile()
    assert (await harness.workspace())["status"]["phase"] == "Creating"


async def test_a_resume_sent_while_suspending_resumes_once_suspended(harness: Harness) -> None:
    await active(harness)
    await request(harness, True)
    await harness.reconcile()
    await request(harness, False)  # the pod is still stopping
    ws = await reconcile_until(harness, "Resuming")
    assert "suspend" not in ws["spec"]


async def test_the_status_is_committed_before_the_request_is_cleared(
    harness: Harness, kube_server: KubeServer
) -> None:
    await active(harness)
    await request(harness, True)
    workspaces = f"/apis/llmsafespaces.dev/v1/namespaces/{harness.namespace}/workspaces"
    kube_server.fail_next(500, method="PATCH", path=f"{workspaces}/ws1", exact=True)
    assert await harness.reconcile() == Requeue(MIN_REQUEUE)  # come back right away
    ws = await harness.workspace()
    assert ws["status"]["phase"] == "Suspending"
    assert ws["spec"]["suspend"] is True  # not lost
    await harness.reconcile()
    ws = await harness.workspace()
    assert "suspend" not in ws["spec"] and ws["status"]["phase"] in ("Suspending", "Suspended")


async def test_a_request_written_meanwhile_is_never_cleared_unseen(harness: Harness) -> None:
    await harness.apply(suspend=True)
    seen = await harness.workspace()  # the pass read true ...
    await request(harness, False)  # ... and the API wrote false right after
    assert await clear_request(harness.kube, seen, True) is None
    assert (await harness.workspace())["spec"]["suspend"] is False


async def test_a_request_and_its_consumption_keep_the_recovery_record(harness: Harness) -> None:
    await active(harness)
    record = {
        "consecutiveFailures": 2,
        "lastFailureClass": "Process",
        "lastFailureAt": "2026-11-29T11:59:00Z",
        "recoveryAttempts": 2,
    }
    live = await harness.kube.patch(
        WORKSPACES, "ws1", {"status": record}, harness.namespace, sub="status"
    )
    await harness.synced(harness.workspaces, "ws1", live)
    await harness.reconcile()
    status = (await harness.workspace())["status"]
    assert status["lastStableAt"] and status["recoverySpec"]  # the stable stretch began
    for value in (False, False):  # a stray resume while running: consumed, nothing else
        await request(harness, value)
        await harness.reconcile()
        assert "suspend" not in (await harness.workspace())["spec"]
        await harness.settle()
        await harness.reconcile()
        status = (await harness.workspace())["status"]
        assert {key: status.get(key) for key in record} == record
        assert status["lastStableAt"]
    # A spec change of the user's still starts the record over.
    await harness.kube.patch(WORKSPACES, "ws1", {"spec": {"timeout": 600}}, harness.namespace)
    await harness.settle()
    await harness.reconcile()
    status = (await harness.workspace())["status"]
    assert "consecutiveFailures" not in status and "recoverySpec" not in status
    assert status["recoveryAttempts"] == 2  # a life's count is never reset
