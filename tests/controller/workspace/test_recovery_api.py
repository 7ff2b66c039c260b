"""Recovery against the Kubernetes API, the kubelet played by status patches and time by the
reconciler's clock: crash loops back off per class and exhaust at the class's threshold,
a spec change starts over, stuck pods are reported at once and replaced at their threshold,
evictions are counted once, boot failures are one episode, a missing credentials Secret is
restored."""

from __future__ import annotations

import base64
import copy
from datetime import UTC, datetime
from typing import Any

from controller.types import ObjectKey, Requeue
from controller.workspace.pod.credentials import PASSWORD
from tests.controller.workspace.conftest import Harness
from tests.controller.workspace.factories import credentials, reconcile_until
from tests.kubeapi import KubeServer
from wspin.core.clock import format_time, parse_time
from wspin.core.kinds import EVENTS, PODS, SECRETS, WORKSPACES
from wspin.core.objects import Obj

INITS = ("platform-init", "platform-bootstrap", "platform-materialize")


def condition(ws: Obj, type_: str) -> Obj | None:
    return next((c for c in ws["status"].get("conditions", []) if c["type"] == type_), None)


def ready_reason(ws: Obj) -> str:
    found = condition(ws, "Ready")
    assert found is not None
    return str(found["reason"])


def booted(*, crashing: str = "", restarts: int = 0) -> list[Obj]:
    statuses = []
    for name in INITS:
        if name == crashing:
            statuses.append(
                {
                    "name": name,
                    "ready": False,
                    "restartCount": restarts,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {
                        "terminated": {"exitCode": 3, "reason": "Error", "message": "no relay"}
                    },
                }
            )
            continue
        statuses.append(
            {
                "name": name,
                "ready": True,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
            }
        )
    return statuses


def crash_loop(restarts: int, *, code: int = 1, reason: str = "Error") -> Obj:
    """The workspace container waiting to restart after its ``restarts + 1``-th exit."""
    return {
        "phase": "Running",
        "podIP": "10.0.0.7",
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "False"},
        ],
        "initContainerStatuses": booted(),
        "containerStatuses": [
            {
                "name": "workspace",
                "ready": False,
                "restartCount": restarts,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {
                    "terminated": {"exitCode": code, "reason": reason, "message": "boom"}
                },
            }
        ],
    }


def serving(restarts: int = 0) -> Obj:
    status = crash_loop(restarts)
    status["conditions"][1]["status"] = "True"
    status["containerStatuses"][0].update(ready=True, state={"running": {}})
    return status


def stopped(status: Obj) -> Obj:
    """``status`` once the kubelet has stopped the pod for its deletion: it marks the pod
    Failed, its containers killed, before the pod goes."""
    status = copy.deepcopy(status)
    status["phase"] = "Failed"
    status["conditions"][1]["status"] = "False"
    status["containerStatuses"][0].update(
        ready=False, state={"terminated": {"exitCode": 137, "reason": "Error"}}
    )
    return status


async def start(h: Harness) -> str:
    """A Workspace whose first pod exists, the reconciler's clock at the API server's time."""
    h.clock.set(datetime.now(UTC).replace(microsecond=0))
    await h.apply()
    await h.reconcile()
    return await h.pod_name()


def recovery(h: Harness, metric: str, failure_class: str) -> float:
    name = f"llmsafespaces_workspace_recovery_{metric}"
    return h.registry.get_sample_value(name, {"failure_class": failure_class}) or 0.0


def pod_failures(h: Harness, reason: str) -> float:
    name = "llmsafespaces_workspace_pod_failures_total"
    return h.registry.get_sample_value(name, {"reason": reason}) or 0.0


def sample(h: Harness, name: str, **labels: str) -> float:
    return h.registry.get_sample_value(name, labels) or 0.0


def event_reads(server: KubeServer) -> list[Any]:
    return [r for r in server.requests if r.path.endswith("/events") and r.method == "GET"]


async def hold(h: Harness, pod_name: str, held: bool) -> None:
    """Keep the pod in its deletion (as a node does until its containers stop), or let it go."""
    finalizers = ["test.wspin/hold"] if held else None
    await h.kube.patch(PODS, pod_name, {"metadata": {"finalizers": finalizers}}, h.namespace)
    await h.settle()


async def warnings(h: Harness, reason: str) -> list[Obj]:
    listing = await h.kube.list(EVENTS, h.namespace, fields="involvedObject.name=ws1")
    return [e for e in listing["items"] if e["reason"] == reason]


class TestCrashLoop:
    async def test_backs_off_per_class_exhausts_at_the_sixth_and_starts_over_on_a_spec_change(
        self, harness: Harness
    ) -> None:
        pod_name = await start(harness)
        uid = (await harness.kube.get(PODS, pod_name, harness.namespace))["metadata"]["uid"]
        waits = []
        for restarts in range(6):
            harness.clock.advance(7)
            await harness.set_pod_status(pod_name, crash_loop(restarts))
            await harness.reconcile()
            ws = await harness.workspace()
            status = ws["status"]
            assert status["consecutiveFailures"] == restarts + 1
            assert status["lastFailureClass"] == "Process"
            assert status["lastFailureAt"] == format_time(harness.clock())
            retry = parse_time(status["nextRetryAt"])
            assert retry is not None
            waits.append((retry - harness.clock()).total_seconds())
            assert ready_reason(ws) == "CrashLoopBackOff" and status["phase"] == "Creating"
            exhausted = condition(ws, "RecoveryExhausted")
            assert (exhausted is not None) == (restarts == 5)
        assert waits == [10, 20, 40, 80, 160, 300]
        assert exhausted is not None and exhausted["status"] == "True"
        assert len(await warnings(harness, "RecoveryExhausted")) == 1
        assert recovery(harness, "exhausted_total", "Process") == 1
        assert recovery(harness, "attempts_total", "Process") == 6
        assert recovery(harness, "backoff_duration_seconds_sum", "Process") == sum(waits)

        # The kubelet keeps restarting in place: the pod is never replaced for a crash.
        live = await harness.kube.get(PODS, pod_name, harness.namespace)
        assert live["metadata"]["uid"] == uid
        # A seventh exit: counted, retried at the cap, no second episode.
        await harness.set_pod_status(pod_name, crash_loop(6))
        await harness.reconcile()
        ws = await harness.workspace()
        assert ws["status"]["consecutiveFailures"] == 7
        assert len(await warnings(harness, "RecoveryExhausted")) == 1
        version = ws["metadata"]["resourceVersion"]
        assert await harness.reconcile() is None  # nothing new: no write
        assert (await harness.workspace())["metadata"]["resourceVersion"] == version

        # A spec change starts over: the record and the condition go, the pod is rebuilt.
        await harness.kube.patch(
            WORKSPACES, "ws1", {"spec": {"restartGeneration": 1}}, harness.namespace
        )
        await harness.settle()
        await harness.reconcile()
        await harness.reconcile()
        ws = await harness.workspace()
        assert "consecutiveFailures" not in ws["status"] and "nextRetryAt" not in ws["status"]
        assert condition(ws, "RecoveryExhausted") is None
        assert ws["status"]["recoveryAttempts"] == 7  # over its life
        assert ws["status"]["restartCount"] == 1 and ws["status"]["observedRestartGeneration"] == 1
        rebuilt = await harness.kube.get(PODS, pod_name, harness.namespace)
        assert rebuilt["metadata"]["uid"] != uid

    async def test_suspend_halts_the_retries_and_ends_the_episode(self, harness: Harness) -> None:
        pod_name = await start(harness)
        for restarts in range(3):
            await harness.set_pod_status(pod_name, crash_loop(restarts, code=2))
            await harness.reconcile()
        live = await harness.kube.patch(
            WORKSPACES,
            "ws1",
            {"status": {"controllerRestartCount": 2}},
            harness.namespace,
            sub="status",
        )  # two health restarts on record as well
        await harness.synced(harness.workspaces, "ws1", live)
        await harness.kube.patch(WORKSPACES, "ws1", {"spec": {"suspend": True}}, harness.namespace)
        await harness.settle()
        ws = await reconcile_until(harness, "Suspended")
        assert await harness.kube.get_or_none(PODS, pod_name, harness.namespace) is None
        for field in ("consecutiveFailures", "lastFailureClass", "nextRetryAt", "lastFailureAt"):
            assert field not in ws["status"], field
        assert ws["status"]["controllerRestartCount"] == 0
        assert ws["status"]["recoveryAttempts"] == 3
        assert await harness.reconcile() is None  # nothing is retried while suspended

    async def test_an_oom_crash_loop_is_a_resource_failure_and_active_again_clears_it(
        self, harness: Harness
    ) -> None:
        pod_name = await start(harness)
        await harness.set_pod_status(pod_name, crash_loop(0, code=137, reason="OOMKilled"))
        await harness.reconcile()
        ws = await harness.workspace()
        assert ws["status"]["lastFailureClass"] == "Resource"
        assert ready_reason(ws) == "OOMKilled" and "spec.memoryLimit" in ws["status"]["message"]

        harness.clock.advance(30)
        await harness.set_pod_status(pod_name, serving(restarts=1))
        assert await harness.reconcile() == Requeue(120)  # the stability window
        ws = await harness.workspace()
        assert ws["status"]["phase"] == "Active" and ws["status"]["consecutiveFailures"] == 1
        assert ws["status"]["lastStableAt"] == format_time(harness.clock())
        assert recovery(harness, "success_total", "Resource") == 1
        assert recovery(harness, "duration_seconds_sum", "Resource") == 30
        harness.clock.advance(120)
        assert await harness.reconcile() is None
        ws = await harness.workspace()
        assert "consecutiveFailures" not in ws["status"] and "lastStableAt" not in ws["status"]
        assert condition(ws, "BootReady")["status"] == "True"  # type: ignore[index]

    async def test_verification_exits_are_never_counted_as_crashes(self, harness: Harness) -> None:
        harness.clock.set(datetime.now(UTC).replace(microsecond=0))
        await harness.apply()
        pod_name = await harness.create_pod()  # injected: it runs the verifier
        for restarts in range(3):
            await harness.set_pod_status(pod_name, crash_loop(restarts, code=81))
            await harness.reconcile()
        ws = await harness.workspace()
        assert condition(ws, "AgentdVerified")["reason"] == "AgentdVerificationFailed"  # type: ignore[index]
        assert "consecutiveFailures" not in ws["status"]
        assert recovery(harness, "attempts_total", "Process") == 0
        # An ordinary exit after them is the first crash, not the fourth.
        await harness.set_pod_status(pod_name, crash_loop(3))
        await harness.reconcile()
        assert (await harness.workspace())["status"]["consecutiveFailures"] == 1


class TestStuck:
    async def test_an_unschedulable_pod_is_reported_at_once_and_replaced_at_five_minutes(
        self, harness: Harness
    ) -> None:
        pod_name = await start(harness)
        first = await harness.kube.get(PODS, pod_name, harness.namespace)
        said = "0/3 nodes are available: 3 Insufficient memory."
        unplaced = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": said,
                }
            ],
        }
        await harness.set_pod_status(pod_name, unplaced)
        harness.clock.advance(240)
        requeue = await harness.reconcile()
        assert requeue is not None and 58 <= requeue.after <= 61
        ws = await harness.workspace()
        assert ws["status"]["phase"] == "Pending" and ready_reason(ws) == "Unschedulable"
        assert "memory=512Mi" in ws["status"]["message"] and said in ws["status"]["message"]
        assert "consecutiveFailures" not in ws["status"]
        assert await harness.kube.get_or_none(PODS, pod_name, harness.namespace) is not None

        harness.clock.advance(61)
        await harness.reconcile()
        ws = await harness.workspace()
        assert await harness.kube.get_or_none(PODS, pod_name, harness.namespace) is None
        assert ws["status"]["consecutiveFailures"] == 1
        assert ws["status"]["lastFailureClass"] == "Infrastructure"
        assert ready_reason(ws) == "Unschedulable"
        assert pod_failures(harness, "Unschedulable") == 1

        # No new pod before the retry is due; then one.
        assert await harness.reconcile() == Requeue(5)
        assert await harness.kube.get_or_none(PODS, pod_name, harness.namespace) is None
        harness.clock.advance(5)
        await harness.reconcile()
        second = await harness.kube.get(PODS, pod_name, harness.namespace)
        assert second["metadata"]["uid"] != first["metadata"]["uid"]
        assert "nextRetryAt" not in (await harness.workspace())["status"]

    async def test_a_missing_credentials_secret_is_restored_with_the_same_values(
        self, harness: Harness
    ) -> None:
        pod_name = await start(harness)
        secret = "workspace-pw-ws1"
        await harness.kube.delete(SECRETS, secret, harness.namespace)
        said = f'secret "{secret}" not found'
        status = crash_loop(0)
        status["containerStatuses"][0].update(
            restartCount=0,
            state={"waiting": {"reason": "CreateContainerConfigError", "message": said}},
        )
        del status["containerStatuses"][0]["lastState"]
        await harness.set_pod_status(pod_name, status)
        await harness.reconcile()
        ws = await harness.workspace()
        assert ready_reason(ws) == "ContainerConfigError"
        assert f"Secret {harness.namespace}/{secret} does not exist" in ws["status"]["message"]
        restored = await harness.kube.get(SECRETS, secret, harness.namespace)
        value = base64.b64decode(restored["data"][PASSWORD]).decode()
        assert value == credentials(ws).password  # what the running pod holds: no recycle
        assert await harness.kube.get_or_none(PODS, pod_name, harness.namespace) is not None

    async def test_a_volume_that_cannot_mount_is_named_from_the_pods_events(
        self, harness: Harness, kube_server: KubeServer
    ) -> None:
        pod_name = await start(harness)
        pod = await harness.kube.get(PODS, pod_name, harness.namespace)
        status = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "initContainerStatuses": [
                {
                    "name": n,
                    "ready": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "PodInitializing"}},
                }
                for n in INITS
            ],
        }
        await harness.set_pod_status(pod_name, status)
        await harness.kube.create(
            EVENTS,
            {
                "metadata": {"generateName": "ws1.", "namespace": harness.namespace},
                "involvedObject": {
                    "kind": "Pod",
                    "name": pod_name,
                    "namespace": harness.namespace,
                    "uid": pod["metadata"]["uid"],
                },
                "type": "Warning",
                "reason": "FailedMount",
                "message": 'MountVolume.MountDevice failed for volume "workspace" : rpc error: '
                "code = Internal desc = mount failed: exit status 32",
                "lastTimestamp": format_time(harness.clock()),
            },
            harness.namespace,
        )
        kube_server.requests.clear()
        requeue = await harness.reconcile()  # within the first minute: no Events read
        assert not event_reads(kube_server)
        assert requeue is not None and 59 <= requeue.after <= 61
        harness.clock.advance(61)
        await harness.reconcile()
        reads = event_reads(kube_server)
        assert len(reads) == 1 and reads[0].query.get("limit") == "50"
        ws = await harness.workspace()
        assert ready_reason(ws) == "VolumeMountFailed"
        assert "volume workspace (PersistentVolumeClaim workspace-ws1)" in ws["status"]["message"]
        await harness.reconcile()  # reused, not read again within the minute
        reads = event_reads(kube_server)
        assert len(reads) == 1


class TestPodLoss:
    async def test_an_evicted_pod_is_counted_once_and_replaced_after_the_backoff(
        self, harness: Harness
    ) -> None:
        pod_name = await start(harness)
        await harness.set_pod_status(pod_name, serving())
        await harness.reconcile()
        assert (await harness.workspace())["status"]["phase"] == "Active"
        evicted = {
            "phase": "Failed",
            "reason": "Evicted",
            "message": "The node was low on resource: memory.",
            "conditions": [{"type": "Ready", "status": "False"}],
        }
        await hold(harness, pod_name, True)  # its node reports the deletion done later
        await harness.set_pod_status(pod_name, evicted)
        cached = harness.pods.get(ObjectKey(harness.namespace, pod_name))
        assert cached is not None
        lagging: Obj = cached
        await harness.reconcile()
        ws = await harness.workspace()
        assert ws["status"]["consecutiveFailures"] == 1
        assert ws["status"]["lastFailureClass"] == "Infrastructure"
        assert ready_reason(ws) == "PodEvicted" and "low on resource" in ws["status"]["message"]
        deleting = await harness.kube.get(PODS, pod_name, harness.namespace)
        assert deleting["metadata"]["deletionTimestamp"]

        # A pod cache that still shows the evicted pod undeleted counts nothing more.
        class Lagging:
            def get(self, key: ObjectKey) -> Obj | None:
                return copy.deepcopy(lagging) if key.name == pod_name else None

            def list(self, namespace: str | None = None, labels: Any = None) -> list[Obj]:
                return [copy.deepcopy(lagging)]

        pods = harness.reconciler.deps.pods
        harness.use(pods=Lagging())
        for _ in range(2):
            await harness.reconcile()
        harness.use(pods=pods)
        ws = await harness.workspace()
        assert ws["status"]["consecutiveFailures"] == 1 and ws["status"]["recoveryAttempts"] == 1
        assert pod_failures(harness, "Evicted") == 1

        await hold(harness, pod_name, False)
        assert await harness.reconcile() == Requeue(5)
        assert await harness.kube.get_or_none(PODS, pod_name, harness.namespace) is None
        harness.clock.advance(5)
        await harness.reconcile()
        assert await harness.kube.get_or_none(PODS, pod_name, harness.namespace) is not None

    async def test_a_drain_eviction_counts_and_a_users_delete_does_not(
        self, harness: Harness
    ) -> None:
        pod_name = await start(harness)
        await harness.schedule(pod_name)
        await harness.set_pod_status(pod_name, serving())
        await harness.reconcile()
        await hold(harness, pod_name, True)
        # The eviction API's part: the pod is marked as disrupted and deleted gracefully. The
        # condition's time is now, as the API's: the controller manager resets one that is
        # stale (older than 2 minutes on a pod not being deleted).
        drained = serving()
        drained["conditions"].append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
                "lastTransitionTime": format_time(harness.clock()),
            }
        )
        await harness.set_pod_status(pod_name, drained)
        await harness.kube.delete(PODS, pod_name, harness.namespace)
        await harness.synced(
            harness.pods, pod_name, await harness.kube.get(PODS, pod_name, harness.namespace)
        )
        await harness.reconcile()
        await harness.reconcile()
        ws = await harness.workspace()
        assert ws["status"]["consecutiveFailures"] == 1 and ready_reason(ws) == "PodDisrupted"
        assert pod_failures(harness, "EvictionByEvictionAPI") == 1
        # The kubelet stops it, marking it Failed before it goes: the same one disruption.
        await harness.set_pod_status(pod_name, stopped(drained))
        await harness.reconcile()
        ws = await harness.workspace()
        assert ws["status"]["consecutiveFailures"] == 1 and ready_reason(ws) == "PodDisrupted"
        await hold(harness, pod_name, False)
        await harness.kubelet_stops()
        # A user's own delete (no disruption) of the replacement is not a failure, neither
        # while it stops nor once the kubelet has marked it Failed.
        harness.clock.advance(5)
        await harness.reconcile()
        await harness.schedule(pod_name)
        await harness.set_pod_status(pod_name, serving())
        await harness.reconcile()
        await hold(harness, pod_name, True)
        await harness.kube.delete(PODS, pod_name, harness.namespace)
        await harness.settle()
        await harness.reconcile()
        ws = await harness.workspace()
        assert ws["status"]["consecutiveFailures"] == 1 and ready_reason(ws) == "PodTerminating"
        await harness.set_pod_status(pod_name, stopped(serving()))
        await harness.reconcile()
        ws = await harness.workspace()
        assert ws["status"]["consecutiveFailures"] == 1 and ready_reason(ws) == "PodTerminating"
        assert pod_failures(harness, "Error") == 0
        await hold(harness, pod_name, False)
        await harness.kubelet_stops()


class TestBootFailure:
    async def test_one_event_and_one_increment_per_episode_and_the_pod_is_kept(
        self, harness: Harness
    ) -> None:
        pod_name = await start(harness)
        uid = (await harness.kube.get(PODS, pod_name, harness.namespace))["metadata"]["uid"]
        status = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "initContainerStatuses": booted(crashing="platform-materialize", restarts=4),
            "containerStatuses": [
                {
                    "name": "workspace",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "PodInitializing"}},
                }
            ],
        }
        await harness.set_pod_status(pod_name, status)
        for _ in range(3):
            harness.clock.advance(3600)
            await harness.reconcile()
        ws = await harness.workspace()
        boot = condition(ws, "BootReady")
        assert boot is not None
        assert (boot["status"], boot["reason"]) == ("False", "PlatformBootFailed")
        assert boot["message"] == "platform-materialize: exit 3 (Error): no relay"
        assert ready_reason(ws) == "PlatformBootFailed"
        assert "consecutiveFailures" not in ws["status"]
        (event,) = await warnings(harness, "PlatformBootFailed")
        assert "container=platform-materialize" in event["message"] and "exit=3" in event["message"]
        boot_failures = "llmsafespaces_workspace_platform_boot_failures_total"
        assert sample(harness, boot_failures, container="platform-materialize", node="unknown") == 1
        live = await harness.kube.get(PODS, pod_name, harness.namespace)
        assert live["metadata"]["uid"] == uid  # never recreated for a boot failure

        await harness.set_pod_status(pod_name, serving())
        await harness.reconcile()
        ws = await harness.workspace()
        assert ws["status"]["phase"] == "Active"
        assert condition(ws, "BootReady")["status"] == "True"  # type: ignore[index]
