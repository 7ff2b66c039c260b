"""Every status field the Workspace reconciler writes is declared in the CRD (captured at the
client, so the API server's pruning cannot hide a gap), through a whole lifecycle: Pending,
Active, a pod that crashes and recovers, a pod that stops being ready, suspend, resume, a pod
that cannot be built, deletion."""

from __future__ import annotations

from controller.workspace.reconcile.reconciler import WorkspaceReconciler
from tests.controller.status_schema import RecordingKube, status_schema, undeclared
from tests.controller.workspace.conftest import Harness, reconcile_deps
from tests.controller.workspace.factories import ready_pod_status, reconcile_until
from wspin.core.kinds import WORKSPACES


async def test_every_status_field_of_the_lifecycle_is_in_the_crd(harness: Harness) -> None:
    recording = RecordingKube(harness.kube)
    harness.reconciler = WorkspaceReconciler(
        reconcile_deps(
            recording, harness.workspaces, harness.pods, harness.pvcs, clock=harness.clock
        )
    )

    async def spec(**fields: object) -> None:
        live = await harness.kube.patch(WORKSPACES, "ws1", {"spec": fields}, harness.namespace)
        await harness.synced(harness.workspaces, "ws1", live)

    await harness.apply()
    await harness.reconcile()
    pod = await harness.pod_name()
    crashed = ready_pod_status()
    crashed["containerStatuses"][0].update(
        ready=False,
        state={"waiting": {"reason": "CrashLoopBackOff"}},
        lastState={"terminated": {"exitCode": 1, "reason": "Error"}},
    )
    await harness.set_pod_status(pod, crashed)
    await harness.reconcile()
    await harness.set_pod_status(pod, ready_pod_status())
    await harness.reconcile()  # Active after a failure: the stable stretch starts
    unready = ready_pod_status()
    unready["containerStatuses"][0]["ready"] = False
    await harness.set_pod_status(pod, unready)
    await harness.reconcile()
    await harness.set_pod_status(pod, ready_pod_status())
    await harness.reconcile()
    await spec(suspend=True)
    await reconcile_until(harness, "Suspended")
    await spec(suspend=False)
    await reconcile_until(harness, "Creating")
    await spec(podSecurityContext={"runAsUser": -1})
    await reconcile_until(harness, "Failed")
    await harness.kube.delete(WORKSPACES, "ws1", harness.namespace)
    for _ in range(100):
        await harness.settle()
        await harness.reconciler.reconcile(harness.key())
        if await harness.kube.get_or_none(WORKSPACES, "ws1", harness.namespace) is None:
            break

    phases = [s.get("phase") for s in recording.statuses if s.get("phase")]
    assert {"Pending", "Active", "Creating", "Suspending", "Suspended", "Resuming"} <= set(phases)
    assert {"Failed", "Terminated"} <= set(phases)
    written = {key for s in recording.statuses for key, value in s.items() if value is not None}
    assert {
        "podIP",
        "endpoint",
        "podNamespace",
        "startTime",
        "restartCount",
        "imageTag",
        "suspendedAt",
        "failureReason",
        "observedRestartGeneration",
        "consecutiveFailures",
        "lastFailureClass",
        "lastFailureAt",
        "nextRetryAt",
        "lastStableAt",
        "recoveryAttempts",
        "lastFailedPod",
        "pendingAt",
        "resumedAt",
        "resumeCount",
    } <= written
    schema = status_schema()
    gaps = sorted({p for s in recording.statuses for p in undeclared(s, schema, "status")})
    assert gaps == [], f"status fields written but not declared in the CRD: {gaps}"
