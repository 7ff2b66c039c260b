"""The Workspace reconciler against the Kubernetes API: PVC and pod, phases, suspend and
resume, deletion with the grace, recreation, and verify-failure detection."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from controller.types import ObjectKey, ObjectReader, Requeue
from controller.workspace.reconcile.reconciler import FINALIZER, VERIFY_FAILURE_REQUEUE
from tests.controller.workspace.conftest import SETTINGS, Harness
from tests.controller.workspace.factories import ready_pod_status, reconcile_until
from tests.kubeapi import KubeServer
from wspin.core.contract import LABEL_WORKSPACE_UID
from wspin.core.errors import Invalid
from wspin.core.kinds import EVENTS, PODS, PVCS, SERVICE_ACCOUNTS, WORKSPACES
from wspin.core.objects import Obj
from wspin.core.owners import ANNOTATION_VERIFIED_OWNER
from wspin.kube.client import Kube

MISMATCH = (
    "AgentdVerificationFailed: expected=" + "a" * 64 + " got=" + "f" * 64 + " binary=/proc/self/exe"
)


def condition(ws: Obj, type_: str) -> Obj | None:
    return next((c for c in ws.get("status", {}).get("conditions", []) if c["type"] == type_), None)


def crashed_status(exit_code: int, message: str, restarts: int = 1) -> Obj:
    return {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": [
            {
                "name": "workspace",
                "ready": False,
                "restartCount": restarts,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": exit_code, "message": message}},
            }
        ],
    }


async def create_injected_pod(h: Harness, *, inject: bool = True) -> str:
    """Play the admission webhook: create the reconciler's pod with delivery injected."""
    return await h.create_pod(inject=inject)


async def events_for(h: Harness, name: str = "ws1") -> list[Obj]:
    listing = await h.kube.list(EVENTS, h.namespace, fields=f"involvedObject.name={name}")
    return list(listing.get("items") or [])


class WriteLog(Kube):
    """A Kube that keeps the method and path of every write it sends."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(kube.api)
        self.writes: list[tuple[str, str]] = []

    async def request(self, method: str, path: str, **kw: Any) -> Obj:
        if method != "GET":
            self.writes.append((method, path.rsplit("/namespaces/", 1)[-1]))
        return await super().request(method, path, **kw)


class TestWrites:
    async def test_the_first_pass_only_adds_the_finalizer_and_asks_for_the_record_at_once(
        self, harness: Harness
    ) -> None:
        log = WriteLog(harness.kube)
        harness.use(kube=log)
        created = await harness.kube.create(
            WORKSPACES,
            {
                "metadata": {"name": "ws1", "namespace": harness.namespace},
                "spec": {"runtime": "python", "storage": {"size": "1Gi"}},
            },
        )
        await harness.synced(harness.workspaces, "ws1", created)
        assert await harness.reconcile() is None  # the write's own event brings the next pass
        ns = harness.namespace
        assert log.writes == [("PATCH", f"{ns}/workspaces/ws1")]
        first = await harness.workspace()
        assert first["metadata"]["finalizers"] == [FINALIZER]
        assert first["metadata"]["annotations"][ANNOTATION_VERIFIED_OWNER] == "adopt"
        assert "status" not in first
        assert await harness.kube.get_or_none(PODS, await harness.pod_name(), ns) is None

    async def test_a_new_workspace_costs_six_writes_and_one_status_write(
        self, harness: Harness
    ) -> None:
        log = WriteLog(harness.kube)
        harness.use(kube=log)
        await harness.apply()  # the finalizer: one write (the record is there already)
        for _ in range(3):  # the pass that builds, then the ones its own writes bring
            await harness.reconcile()
        pod = await harness.pod_name()
        ns = harness.namespace
        assert sorted(log.writes) == sorted(
            [
                ("PATCH", f"{ns}/workspaces/ws1"),
                ("POST", f"{ns}/persistentvolumeclaims"),
                ("POST", f"{ns}/serviceaccounts"),
                ("POST", f"{ns}/secrets"),
                ("POST", f"{ns}/pods"),
                ("PATCH", f"{ns}/workspaces/ws1/status"),
            ]
        )
        status = (await harness.workspace())["status"]
        assert (status["phase"], status["podName"]) == ("Pending", pod)


class TestApply:
    async def test_a_workspace_gets_an_owned_pvc_and_a_hardened_labelled_pod(
        self, harness: Harness
    ) -> None:
        ws = await harness.apply(owner={"userID": "alice"})
        uid = ws["metadata"]["uid"]
        assert await harness.reconcile() is None  # the pod's own events bring it back

        pod = await harness.kube.get(PODS, f"ws1-{uid[:8]}", harness.namespace)
        assert pod["metadata"]["labels"]["llmsafespaces.dev/workspace"] == "ws1"
        assert pod["metadata"]["labels"]["llmsafespaces.dev/tenant"] == "alice"
        (owner,) = pod["metadata"]["ownerReferences"]
        assert (owner["uid"], owner["controller"], owner["kind"]) == (uid, True, "Workspace")
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["spec"]["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert pod["spec"]["runtimeClassName"] == "gvisor"
        assert pod["spec"]["terminationGracePeriodSeconds"] == SETTINGS.termination_grace

        pvc = await harness.kube.get(PVCS, "workspace-ws1", harness.namespace)
        assert pvc["metadata"]["ownerReferences"][0]["uid"] == uid
        assert pvc["spec"]["resources"]["requests"]["storage"] == "10Gi"
        account = await harness.kube.get(SERVICE_ACCOUNTS, "workspace-ws1", harness.namespace)
        assert account["automountServiceAccountToken"] is False
        for created in (pod, pvc, account):  # what the controller creates, it labels as its own
            assert created["metadata"]["labels"][LABEL_WORKSPACE_UID] == uid

        ws = await harness.workspace()
        assert FINALIZER in ws["metadata"]["finalizers"]
        assert ws["status"]["phase"] == "Pending"  # nothing schedules pods on the test server
        assert ws["status"]["podName"] == f"ws1-{uid[:8]}"
        assert ws["status"]["pvcName"] == "workspace-ws1"
        assert ws["status"]["podNamespace"] == harness.namespace
        assert "podIP" not in ws["status"] and "endpoint" not in ws["status"]
        assert ws["status"]["observedGeneration"] == 1
        assert condition(ws, "Ready")["reason"] == "PodPending"  # type: ignore[index]
        version = ws["metadata"]["resourceVersion"]
        await harness.reconcile()  # the new pod, unscheduled: nothing new to write
        assert (await harness.workspace())["metadata"]["resourceVersion"] == version

    async def test_a_ready_pod_makes_the_workspace_active_and_a_rerun_writes_nothing(
        self, harness: Harness
    ) -> None:
        await harness.apply()
        await harness.reconcile()
        await harness.set_pod_status(await harness.pod_name(), ready_pod_status())
        assert await harness.reconcile() is None
        ws = await harness.workspace()
        assert ws["status"]["phase"] == "Active"
        assert condition(ws, "Ready")["status"] == "True"  # type: ignore[index]
        assert ws["status"]["podIP"] == "10.0.0.7"
        assert ws["status"]["endpoint"] == "http://10.0.0.7:4096"
        assert ws["status"]["startTime"] == "2026-11-29T12:00:00Z"
        assert ws["status"]["imageTag"] == "python"  # an image without a tag: the image
        assert ws["status"]["restartCount"] == 0

        version = ws["metadata"]["resourceVersion"]
        assert await harness.reconcile() is None
        assert (await harness.workspace())["metadata"]["resourceVersion"] == version

    async def test_a_workspace_that_cannot_become_a_pod_fails_and_is_retried_with_backoff(
        self, harness: Harness
    ) -> None:
        await harness.apply(podSecurityContext={"runAsUser": -5})
        waits = []
        for _ in range(3):
            result = await harness.reconcile()
            assert isinstance(result, Requeue)
            waits.append(result.after)
            ws = await harness.workspace()
            assert ws["status"]["phase"] == "Failed"
            assert ws["status"]["reason"] == "PodBuildFailed"
            assert "spec.podSecurityContext.runAsUser" in ws["status"]["message"]
            # Its own status write brings a reconcile: nothing more is counted before the retry.
            await harness.settle()
            assert await harness.reconcile() == result
            harness.clock.advance(result.after)
        assert waits == [30.0, 60.0, 120.0]  # the Configuration class's backoff
        ws = await harness.workspace()
        assert (ws["status"]["consecutiveFailures"], ws["status"]["lastFailureClass"]) == (
            3,
            "Configuration",
        )
        exhausted = condition(ws, "RecoveryExhausted")
        assert exhausted is not None and exhausted["status"] == "True"
        assert [e["reason"] for e in await events_for(harness)].count("RecoveryExhausted") == 1
        assert harness.pods.list() == []
        # A spec change starts over at once: the pod is built.
        await harness.kube.patch(
            WORKSPACES, "ws1", {"spec": {"podSecurityContext": None}}, harness.namespace
        )
        await harness.settle()
        await harness.reconcile()
        ws = await harness.workspace()
        assert ws["status"]["phase"] == "Pending" and "consecutiveFailures" not in ws["status"]
        assert await harness.kube.get_or_none(PODS, await harness.pod_name(), harness.namespace)

    async def test_a_pod_the_api_server_rejects_fails_the_workspace_and_is_built_again_later(
        self, harness: Harness, kube_server: KubeServer
    ) -> None:
        await harness.apply()
        rejection = 'Pod "ws1" is invalid: spec.runtimeClassName: Invalid value: "Bad!"'
        pods = f"/api/v1/namespaces/{harness.namespace}/pods"
        kube_server.fail_next(422, method="POST", path=pods, message=rejection)
        assert await harness.reconcile() == Requeue(30.0)  # the Configuration class's backoff
        ws = await harness.workspace()
        assert ws["status"]["phase"] == "Failed"
        assert ws["status"]["reason"] == "PodBuildFailed"
        assert "rejected the Pod" in ws["status"]["message"]
        assert rejection in ws["status"]["message"]
        assert "the next try is due at 2026-11-29T12:00:30Z" in ws["status"]["message"]
        assert condition(ws, "Ready")["message"] == ws["status"]["message"]  # type: ignore[index]

        # Not before the backoff has passed: no pod is sent meanwhile.
        await harness.settle()
        kube_server.writes.clear()
        assert await harness.reconcile() == Requeue(30.0)
        assert not [w for w in kube_server.writes if w.path == pods]
        # Then the API server takes it, with no edit of the Workspace.
        harness.clock.advance(30)
        await harness.reconcile()
        assert [w for w in kube_server.writes if w.path == pods]
        ws = await harness.workspace()
        assert ws["status"]["phase"] == "Pending"
        assert "reason" not in ws["status"] and "failureReason" not in ws["status"]
        assert await harness.kube.get_or_none(PODS, await harness.pod_name(), harness.namespace)

    async def test_the_workspaces_dev_preview_and_session_cap_reach_agentd_as_env(
        self, harness: Harness
    ) -> None:
        def settings_env(pod: Obj) -> dict[str, str]:
            env = pod["spec"]["containers"][0]["env"]
            return {e["name"]: e["value"] for e in env if e["name"].startswith("WORKSPACE_")}

        # The CRD's defaults: no preview, five sessions.
        await harness.apply()
        await harness.reconcile()
        pod = await harness.kube.get(PODS, await harness.pod_name(), harness.namespace)
        assert settings_env(pod) == {
            "WORKSPACE_ID": "ws1",
            "WORKSPACE_DIR": "/workspace",
            "WORKSPACE_DEV_PREVIEW_ENABLED": "false",
            "WORKSPACE_MAX_ACTIVE_SESSIONS": "5",
        }
        await harness.apply("ws2", maxActiveSessions=12, networkAccess={"devPreview": True})
        await harness.reconcile("ws2")
        pod = await harness.kube.get(PODS, await harness.pod_name("ws2"), harness.namespace)
        assert settings_env(pod)["WORKSPACE_DEV_PREVIEW_ENABLED"] == "true"
        assert settings_env(pod)["WORKSPACE_MAX_ACTIVE_SESSIONS"] == "12"
        # The CRD bounds the cap.
        with pytest.raises(Invalid, match="maxActiveSessions"):
            await harness.apply("ws3", maxActiveSessions=21)

    async def test_a_finalizer_write_refused_with_a_conflict_is_counted_and_left_to_the_next_event(
        self, harness: Harness, kube_server: KubeServer
    ) -> None:
        await harness.apply(finalized=False)
        workspaces = f"/apis/llmsafespaces.dev/v1/namespaces/{harness.namespace}/workspaces"
        kube_server.fail_next(409, method="PATCH", path=f"{workspaces}/ws1", exact=True)
        assert await harness.reconcile() is None  # no backoff: the newer version's event comes

        def conflicts(site: str) -> float | None:
            return harness.registry.get_sample_value(
                "llmsafespaces_workspace_status_update_conflicts_total", {"site": site}
            )

        assert (conflicts("finalizer"), conflicts("status")) == (1, 0)
        await harness.reconcile()
        assert FINALIZER in (await harness.workspace())["metadata"]["finalizers"]

    async def test_a_deleted_workspace_is_not_found_and_that_is_success(
        self, harness: Harness
    ) -> None:
        assert await harness.reconciler.reconcile(harness.key("never-created")) is None


class TestLifecycle:
    async def test_suspend_removes_the_pod_keeps_the_pvc_and_resume_brings_a_new_pod(
        self, harness: Harness
    ) -> None:
        await harness.apply()
        await harness.reconcile()
        first = await harness.kube.get(PODS, await harness.pod_name(), harness.namespace)

        await harness.kube.patch(WORKSPACES, "ws1", {"spec": {"suspend": True}}, harness.namespace)
        ws = await reconcile_until(harness, "Suspended")
        assert "podName" not in ws["status"]
        assert "suspend" not in ws["spec"]  # the request is consumed
        assert ws["status"]["suspendedAt"] == "2026-11-29T12:00:00Z"
        assert (
            await harness.kube.get_or_none(PODS, await harness.pod_name(), harness.namespace)
            is None
        )
        assert await harness.kube.get_or_none(PVCS, "workspace-ws1", harness.namespace) is not None

        await harness.kube.patch(WORKSPACES, "ws1", {"spec": {"suspend": False}}, harness.namespace)
        await harness.settle()
        await harness.reconcile()
        ws = await harness.workspace()
        assert ws["status"]["phase"] == "Resuming"
        assert "suspend" not in ws["spec"] and "suspendedAt" not in ws["status"]
        ws = await reconcile_until(harness, "Creating")
        second = await harness.kube.get(PODS, await harness.pod_name(), harness.namespace)
        assert second["metadata"]["uid"] != first["metadata"]["uid"]
        assert ws["status"]["podName"] == second["metadata"]["name"]

    async def test_deletion_terminates_the_pod_with_the_grace_then_releases_the_workspace(
        self, harness: Harness
    ) -> None:
        await harness.apply()
        await harness.reconcile()
        pod_name = await harness.pod_name()
        await harness.kube.delete(WORKSPACES, "ws1", harness.namespace)
        ws = await harness.workspace()
        assert ws["metadata"]["deletionTimestamp"]  # held by the finalizer

        await harness.reconciler.reconcile(harness.key())
        ws_now = await harness.kube.get_or_none(WORKSPACES, "ws1", harness.namespace)
        if ws_now is not None:  # the pod is still in its grace period
            assert ws_now["status"]["phase"] == "Terminating"
        for _ in range(100):
            if await _gone(harness, WORKSPACES, "ws1"):
                break
            await harness.settle()
            await harness.reconciler.reconcile(harness.key())
            await asyncio.sleep(0.1)
        assert await _gone(harness, WORKSPACES, "ws1")
        assert await _gone(harness, PODS, pod_name)

    async def test_deletion_ends_terminated_with_no_pod_fields_before_the_workspace_goes(
        self, harness: Harness, kube_server: KubeServer
    ) -> None:
        await harness.apply()
        await harness.reconcile()
        pod_name = await harness.pod_name()
        await harness.kube.delete(PODS, pod_name, harness.namespace, grace_seconds=0)
        await harness.synced(harness.pods, pod_name, None)
        await harness.kube.delete(WORKSPACES, "ws1", harness.namespace)
        await harness.settle()
        kube_server.writes.clear()
        await harness.reconciler.reconcile(harness.key())
        status_writes = [w for w in kube_server.writes if w.path.endswith("/ws1/status")]
        assert len(status_writes) == 1  # Terminated, then the finalizer goes
        assert await _gone(harness, WORKSPACES, "ws1")

    async def test_a_terminated_workspace_that_was_not_deleted_keeps_no_pod(
        self, harness: Harness
    ) -> None:
        await harness.apply()
        await harness.reconcile()
        live = await harness.kube.patch(
            WORKSPACES, "ws1", {"status": {"phase": "Terminated"}}, harness.namespace, sub="status"
        )
        await harness.synced(harness.workspaces, "ws1", live)
        await harness.reconcile()
        assert (await harness.workspace())["status"]["phase"] == "Terminating"
        ws = await reconcile_until(harness, "Terminated")
        assert "podName" not in ws["status"]
        assert await _gone(harness, PODS, await harness.pod_name())

    async def test_a_new_restart_generation_recreates_the_pod(self, harness: Harness) -> None:
        await harness.apply()
        await harness.reconcile()
        first = await harness.kube.get(PODS, await harness.pod_name(), harness.namespace)
        await harness.kube.patch(
            WORKSPACES, "ws1", {"spec": {"restartGeneration": 1}}, harness.namespace
        )
        await harness.settle()
        for _ in range(100):
            await harness.reconcile()
            pod = await harness.kube.get_or_none(PODS, await harness.pod_name(), harness.namespace)
            if pod and pod["metadata"]["uid"] != first["metadata"]["uid"]:
                break
            await asyncio.sleep(0.1)
        assert pod is not None
        assert pod["metadata"]["annotations"]["llmsafespaces.dev/restart-generation"] == "1"
        assert (await harness.workspace())["status"]["observedGeneration"] == 2

    async def test_a_new_architecture_recreates_the_pod_on_that_architecture(
        self, harness: Harness
    ) -> None:
        await harness.apply()
        await harness.reconcile()
        await harness.kube.patch(
            WORKSPACES, "ws1", {"spec": {"architecture": "arm64"}}, harness.namespace
        )
        await harness.settle()
        for _ in range(100):
            await harness.reconcile()
            pod = await harness.kube.get_or_none(PODS, await harness.pod_name(), harness.namespace)
            if pod and pod["spec"]["nodeSelector"]["kubernetes.io/arch"] == "arm64":
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the pod was not recreated for arm64")


async def _gone(h: Harness, resource: Any, name: str) -> bool:
    return await h.kube.get_or_none(resource, name, h.namespace) is None


class LaggingReader:
    """A cache that stopped at the moment it was made: every read returns that state."""

    def __init__(self, reader: ObjectReader) -> None:
        self._frozen = {ObjectKey.of(obj): copy.deepcopy(obj) for obj in reader.list()}

    def get(self, key: ObjectKey) -> Obj | None:
        return copy.deepcopy(self._frozen.get(key))

    def list(self, namespace: str | None = None, labels: dict[str, str] | None = None) -> list[Obj]:
        return [copy.deepcopy(obj) for obj in self._frozen.values()]


class TestVerifyFailureDetection:
    def metric(self, h: Harness, artifact: str, outcome: str, digest: str) -> float:
        value = h.registry.get_sample_value(
            f"llmsafespaces_workspace_{artifact}_verify_failures_total",
            {"outcome": outcome, "node": "node-a", artifact: digest},
        )
        return value or 0.0

    async def test_an_81_gives_one_condition_one_event_and_one_metric_over_three_reconciles(
        self, harness: Harness
    ) -> None:
        await harness.apply()
        pod_name = await create_injected_pod(harness)
        await harness.set_pod_status(pod_name, crashed_status(81, MISMATCH))

        for _ in range(3):
            # First boot failed in Creating: detected, handled, requeued after 5 minutes.
            assert await harness.reconcile() == Requeue(VERIFY_FAILURE_REQUEUE)

        ws = await harness.workspace()
        verified = condition(ws, "AgentdVerified")
        assert verified is not None
        assert (verified["status"], verified["reason"]) == ("False", "AgentdVerificationFailed")
        assert verified["message"] == MISMATCH
        assert condition(ws, "OpencodeVerified") is None
        assert ws["status"]["phase"] == "Creating"
        assert self.metric(harness, "agentd", "verify_failed", "0123456789ab") == 1.0
        (event,) = await events_for(harness)
        assert event["type"] == "Warning"
        assert event["reason"] == "AgentdVerificationFailed"
        assert "expected=" in event["message"] and "node=node-a" in event["message"]
        assert event["involvedObject"]["uid"] == ws["metadata"]["uid"]
        # Handled, not recovered: the pod is left to the kubelet.
        assert (await harness.kube.get(PODS, pod_name, harness.namespace))["metadata"]["uid"]

    async def test_a_lagging_cache_does_not_turn_one_episode_into_several_reports(
        self, harness: Harness
    ) -> None:
        await harness.apply()
        pod_name = await create_injected_pod(harness)
        await harness.reconcile()  # adds the finalizer; the pod has not failed yet
        harness.use(workspaces=LaggingReader(harness.workspaces))
        await harness.set_pod_status(pod_name, crashed_status(81, MISMATCH))
        for _ in range(3):  # every reconcile sees the Workspace from before the first report
            await harness.reconciler.reconcile(harness.key())
        assert self.metric(harness, "agentd", "verify_failed", "0123456789ab") == 1.0
        assert len(await events_for(harness)) == 1

    async def test_an_82_reports_the_overlay_missing_reason_and_outcome(
        self, harness: Harness
    ) -> None:
        await harness.apply()
        pod_name = await create_injected_pod(harness)
        await harness.set_pod_status(pod_name, crashed_status(82, ""))
        await harness.reconcile()
        verified = condition(await harness.workspace(), "AgentdVerified")
        assert verified is not None and verified["reason"] == "AgentdOverlayMissing"
        assert verified["message"] == "agentd integrity failure: exit code 82"
        assert self.metric(harness, "agentd", "overlay_missing", "0123456789ab") == 1.0

    async def test_an_83_blames_only_opencode(self, harness: Harness) -> None:
        await harness.apply()
        pod_name = await create_injected_pod(harness)
        await harness.set_pod_status(pod_name, crashed_status(83, "OpencodeVerificationFailed: x"))
        await harness.reconcile()
        ws = await harness.workspace()
        assert condition(ws, "OpencodeVerified")["reason"] == "OpencodeVerificationFailed"  # type: ignore[index]
        assert condition(ws, "AgentdVerified") is None
        assert self.metric(harness, "opencode", "verify_failed", "fedcba987654") == 1.0
        assert self.metric(harness, "agentd", "verify_failed", "0123456789ab") == 0.0

    async def test_an_active_workspace_whose_pod_fails_verification_is_no_longer_active(
        self, harness: Harness
    ) -> None:
        await harness.apply()
        pod_name = await create_injected_pod(harness)
        await harness.set_pod_status(pod_name, ready_pod_status())
        await harness.reconcile()
        await harness.set_pod_status(pod_name, crashed_status(84, "OpencodeOverlayMissing: b"))
        assert await harness.reconcile() == Requeue(VERIFY_FAILURE_REQUEUE)
        ws = await harness.workspace()
        assert ws["status"]["phase"] == "Creating"
        assert "podIP" not in ws["status"]
        assert condition(ws, "Ready")["reason"] == "PodNotReady"  # type: ignore[index]
        assert condition(ws, "OpencodeVerified")["status"] == "False"  # type: ignore[index]

    async def test_a_healthy_injected_pod_is_marked_verified_for_both_artifacts(
        self, harness: Harness
    ) -> None:
        await harness.apply()
        pod_name = await create_injected_pod(harness)
        await harness.set_pod_status(pod_name, ready_pod_status())
        await harness.reconcile()
        ws = await harness.workspace()
        for type_ in ("AgentdVerified", "OpencodeVerified"):
            verified = condition(ws, type_)
            assert verified is not None
            assert (verified["status"], verified["reason"]) == ("True", type_)
        assert await events_for(harness) == []

    async def test_an_unmapped_exit_code_sets_no_condition(self, harness: Harness) -> None:
        await harness.apply()
        pod_name = await create_injected_pod(harness)
        await harness.set_pod_status(pod_name, crashed_status(137, "OOMKilled"))
        assert await harness.reconcile() is None
        ws = await harness.workspace()
        assert condition(ws, "AgentdVerified") is None
        assert condition(ws, "OpencodeVerified") is None

    async def test_a_pod_without_the_marker_is_never_verified_nor_blamed(
        self, harness: Harness
    ) -> None:
        await harness.apply()
        pod_name = await create_injected_pod(harness, inject=False)
        await harness.set_pod_status(pod_name, crashed_status(81, MISMATCH))
        await harness.reconcile()
        await harness.set_pod_status(pod_name, ready_pod_status())
        await harness.reconcile()
        ws = await harness.workspace()
        assert ws["status"]["phase"] == "Active"
        assert condition(ws, "AgentdVerified") is None
        assert await events_for(harness) == []

    async def test_a_replacement_pod_without_the_marker_drops_the_earlier_verdict(
        self, harness: Harness
    ) -> None:
        await harness.apply()
        pod_name = await create_injected_pod(harness)
        await harness.set_pod_status(pod_name, ready_pod_status())
        await harness.reconcile()
        assert condition(await harness.workspace(), "AgentdVerified") is not None

        # The pod goes (a loss: its replacement waits the first Infrastructure backoff) and
        # is admitted without delivery (no webhook here).
        await harness.kube.delete(PODS, pod_name, harness.namespace, grace_seconds=0)
        await reconcile_until(harness, "Creating")
        harness.clock.advance(5)
        await harness.reconcile()
        replacement = await harness.kube.get(PODS, pod_name, harness.namespace)
        assert not any(
            e["name"] == "AGENTD_IMAGE_VOLUME" for e in replacement["spec"]["containers"][0]["env"]
        )
        await harness.set_pod_status(pod_name, ready_pod_status())
        await harness.reconcile()
        ws = await harness.workspace()
        assert ws["status"]["phase"] == "Active"
        assert condition(ws, "AgentdVerified") is None
        assert condition(ws, "OpencodeVerified") is None

    async def test_a_recovered_pod_flips_the_condition_back_to_true(self, harness: Harness) -> None:
        await harness.apply()
        pod_name = await create_injected_pod(harness)
        await harness.set_pod_status(pod_name, crashed_status(81, MISMATCH))
        await harness.reconcile()
        await harness.set_pod_status(pod_name, ready_pod_status())
        await harness.reconcile()
        verified = condition(await harness.workspace(), "AgentdVerified")
        assert verified is not None and verified["status"] == "True"


class RecordingStaging:
    """A staging pass that reports one condition and remembers the phases it ran in."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def run(self, ws: Obj) -> list[Obj]:
        self.seen.append(ws["metadata"]["name"])
        return [
            {"type": "RelayStaged", "status": "True", "reason": "Staged", "message": "2 providers"}
        ]


async def test_the_staging_pass_runs_before_the_pod_is_built_and_in_every_phase_after(
    harness: Harness,
) -> None:
    staging = RecordingStaging()
    harness.use(staging=staging)
    await harness.apply()
    await harness.reconcile()  # stages, then creates the pod: its first start finds the handoff
    assert staging.seen == ["ws1"]
    await harness.reconcile()  # pod not scheduled: Pending, and revocation must not wait
    assert staging.seen == ["ws1", "ws1"]
    await harness.set_pod_status(await harness.pod_name(), ready_pod_status())
    await harness.reconcile()
    assert staging.seen == ["ws1", "ws1", "ws1"]
    ws = await harness.workspace()
    assert ws["status"]["phase"] == "Active"
    staged = condition(ws, "RelayStaged")
    assert staged is not None and staged["reason"] == "Staged"
