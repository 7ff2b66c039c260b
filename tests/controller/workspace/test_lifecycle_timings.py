"""The lifecycle metrics as the reconciler records them against the Kubernetes API: creation
time from the API's request stamp, resumes told apart, phase changes and deletions counted
once their status is written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controller.workspace.reconcile.anchors import REQUESTED_AT
from tests.controller.workspace.conftest import Harness
from tests.controller.workspace.factories import ready_pod_status, reconcile_until
from wspin.core.clock import format_time
from wspin.core.kinds import WORKSPACES


def value(h: Harness, name: str, **labels: str) -> float:
    return h.registry.get_sample_value(name, labels) or 0.0


async def suspend_and_resume(h: Harness, seconds: float) -> None:
    """Suspend, resume, and make the new pod ready ``seconds`` after the resume began."""
    for request, phase in ((True, "Suspended"), (False, "Resuming")):
        live = await h.kube.patch(WORKSPACES, "ws1", {"spec": {"suspend": request}}, h.namespace)
        await h.synced(h.workspaces, "ws1", live)
        await reconcile_until(h, phase)
    await reconcile_until(h, "Creating")
    h.clock.advance(seconds)
    await h.set_pod_status(await h.pod_name(), ready_pod_status())
    await reconcile_until(h, "Active")


async def test_creation_resumes_and_deletion_are_measured_and_counted(harness: Harness) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    harness.clock.set(now)
    requested = format_time(now - timedelta(seconds=20))
    created = await harness.kube.create(
        WORKSPACES,
        {
            "metadata": {
                "name": "ws1",
                "namespace": harness.namespace,
                "annotations": {REQUESTED_AT: requested},
            },
            "spec": {
                "runtime": "python",
                "storage": {"size": "10Gi"},
                "packages": [{"requirements": ["numpy"]}],
            },
        },
    )
    await harness.synced(harness.workspaces, "ws1", created)
    await harness.reconcile()  # the finalizer
    await harness.reconcile()
    assert (await harness.workspace())["status"]["pendingAt"] == requested
    harness.clock.advance(22)
    await harness.set_pod_status(await harness.pod_name(), ready_pod_status())
    await harness.reconcile()
    ws = await harness.workspace()
    assert ws["status"]["phase"] == "Active" and "pendingAt" not in ws["status"]
    create = "llmsafespaces_workspace_create_duration_seconds"
    labels = {"has_packages": "true", "has_init_script": "false"}
    assert value(harness, f"{create}_sum", **labels) == 42  # from the request, not the pass
    created_total = "llmsafespaces_workspaces_created_total"
    assert value(harness, created_total, runtime="python", security_level="none") == 1

    await suspend_and_resume(harness, 8)
    await suspend_and_resume(harness, 13)
    resume = "llmsafespaces_workspace_resume_duration_seconds_sum"
    assert value(harness, resume, resume_type="first_resume") == 8
    assert value(harness, resume, resume_type="subsequent_resume") == 13
    assert (await harness.workspace())["status"]["resumeCount"] == 2
    moves = "llmsafespaces_workspace_phase_transitions_total"
    assert value(harness, moves, from_phase="Active", to_phase="Suspending") == 2
    assert value(harness, moves, from_phase="Suspended", to_phase="Resuming") == 2
    assert value(harness, created_total, runtime="python", security_level="none") == 3
    assert value(harness, f"{create}_count", **labels) == 1  # the creation only

    await harness.kube.delete(WORKSPACES, "ws1", harness.namespace)
    for _ in range(3):
        await harness.settle()
        await harness.reconciler.reconcile(harness.key())
    deleted = "llmsafespaces_workspaces_deleted_total"
    assert value(harness, deleted, runtime="python", security_level="none") == 1
