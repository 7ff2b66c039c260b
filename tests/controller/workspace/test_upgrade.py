"""Upgrading from a release that named the PVC ``<ws>-workspace`` and put the admin token in
the workspace container's env: the Workspace keeps its volume (no data loss), and its pod,
whose token the controller cannot know, is replaced once by one built the current way. The
former release's objects carry no owner label: they are the Workspace's because they are older
than the controller's credentials key, and the claim of the former name also because it is the
first one the Workspace runs on. An unlabelled object made after the key, and a replaced claim,
are reported, never adopted."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

from controller.workspace.pod import ownership
from controller.workspace.pod.builder import desired_pod
from controller.workspace.pod.credentials import ANNOTATION_CREDENTIALS_KEY
from controller.workspace.pod.storage import desired_pvc
from tests.controller.workspace.conftest import SETTINGS, Harness
from tests.controller.workspace.factories import credentials, ready_pod_status
from wspin.core.contract import LABEL_WORKSPACE_UID
from wspin.core.kinds import PODS, PVCS
from wspin.core.objects import Obj

LEGACY_PVC = "ws1-workspace"


def pod_of_the_former_release(ws: Obj) -> Obj:
    """The pod the former release built: the old claim name, the token as plain env, no
    bearer on the probes and no credentials key."""
    pod = copy.deepcopy(desired_pod(ws, SETTINGS, credentials=credentials(ws), claim=LEGACY_PVC))
    del pod["metadata"]["annotations"][ANNOTATION_CREDENTIALS_KEY]
    main = pod["spec"]["containers"][0]
    for probe in ("startupProbe", "readinessProbe"):
        main[probe]["httpGet"].pop("httpHeaders")
    main["env"] = [e for e in main["env"] if e["name"] != "AGENTD_ADMIN_TOKEN_FILE"]
    main["env"].append(
        {
            "name": "AGENTD_ADMIN_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "workspace-pw-ws1", "key": "admin-token"}},
        }
    )
    return pod


async def test_an_owned_volume_of_the_former_name_is_kept_and_the_old_pod_replaced(
    harness: Harness,
) -> None:
    ws = await harness.apply()
    former_pvc = ownership.stamp(desired_pvc(ws, LEGACY_PVC), ws)  # labelled before the upgrade
    pvc = await harness.kube.create(PVCS, former_pvc, harness.namespace)
    await harness.synced(harness.pvcs, LEGACY_PVC, pvc)
    former_pod = ownership.stamp(pod_of_the_former_release(ws), ws)
    await harness.create_account(ws)
    old = await harness.kube.create(PODS, former_pod, harness.namespace)
    await harness.synced(harness.pods, old["metadata"]["name"], old)
    await harness.set_pod_status(old["metadata"]["name"], ready_pod_status())

    await harness.reconcile()
    status = (await harness.workspace())["status"]
    assert status["pvcName"] == LEGACY_PVC
    assert status["restartCount"] == 1
    await harness.synced(harness.pods, old["metadata"]["name"], None)
    await harness.reconcile()

    new = await harness.kube.get(PODS, old["metadata"]["name"], harness.namespace)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert new["metadata"]["annotations"][ANNOTATION_CREDENTIALS_KEY] == "t1"
    (volume,) = [v for v in new["spec"]["volumes"] if v["name"] == "workspace"]
    assert volume["persistentVolumeClaim"]["claimName"] == LEGACY_PVC
    assert await harness.kube.get_or_none(PVCS, "workspace-ws1", harness.namespace) is None
    assert (await harness.workspace())["status"]["pvcName"] == LEGACY_PVC


async def test_a_workspace_without_a_former_volume_gets_the_new_name(harness: Harness) -> None:
    await harness.apply()
    await harness.reconcile()
    assert (await harness.workspace())["status"]["pvcName"] == "workspace-ws1"
    assert await harness.kube.get_or_none(PVCS, LEGACY_PVC, harness.namespace) is None


async def test_a_pod_of_the_former_release_left_unlabelled_is_reported_not_adopted(
    harness: Harness,
) -> None:
    ws = await harness.apply()
    await harness.create_account(ws, stamp=False)
    old = await harness.kube.create(PODS, pod_of_the_former_release(ws), harness.namespace)
    await harness.synced(harness.pods, old["metadata"]["name"], old)
    await harness.reconcile()
    ready = next(
        c for c in (await harness.workspace())["status"]["conditions"] if c["type"] == "Ready"
    )
    assert ready["reason"] == "PodConflict" and LABEL_WORKSPACE_UID in ready["message"]
    live = await harness.kube.get(PODS, old["metadata"]["name"], harness.namespace)
    assert live["metadata"]["uid"] == old["metadata"]["uid"]


def after_the_upgrade(harness: Harness) -> None:
    """The controller's credentials key is newer than everything created so far."""
    harness.reconciler.deps.writes.legacy_before = datetime.now(UTC) + timedelta(hours=1)


async def test_unlabelled_objects_older_than_the_key_are_the_workspaces_and_the_pod_replaced(
    harness: Harness,
) -> None:
    ws = await harness.apply()
    pvc = await harness.kube.create(PVCS, desired_pvc(ws, LEGACY_PVC), harness.namespace)
    await harness.synced(harness.pvcs, LEGACY_PVC, pvc)
    await harness.create_account(ws, stamp=False)
    old = await harness.kube.create(PODS, pod_of_the_former_release(ws), harness.namespace)
    await harness.synced(harness.pods, old["metadata"]["name"], old)
    await harness.set_pod_status(old["metadata"]["name"], ready_pod_status())
    after_the_upgrade(harness)

    await harness.reconcile()
    status = (await harness.workspace())["status"]
    assert status["pvcName"] == LEGACY_PVC and status["pvcUID"] == pvc["metadata"]["uid"]
    assert status["restartCount"] == 1
    await harness.synced(harness.pods, old["metadata"]["name"], None)
    await harness.reconcile()
    new = await harness.kube.get(PODS, old["metadata"]["name"], harness.namespace)
    assert new["metadata"]["labels"][LABEL_WORKSPACE_UID] == ws["metadata"]["uid"]
    (volume,) = [v for v in new["spec"]["volumes"] if v["name"] == "workspace"]
    assert volume["persistentVolumeClaim"]["claimName"] == LEGACY_PVC
    assert await harness.kube.get_or_none(PVCS, "workspace-ws1", harness.namespace) is None


async def test_the_first_claim_of_the_former_name_is_kept_and_a_replacement_is_reported(
    harness: Harness,
) -> None:
    ws = await harness.apply()
    first = await harness.kube.create(PVCS, desired_pvc(ws, LEGACY_PVC), harness.namespace)
    await harness.synced(harness.pvcs, LEGACY_PVC, first)
    await harness.reconcile()
    status = (await harness.workspace())["status"]
    assert (status["pvcName"], status["pvcUID"]) == (LEGACY_PVC, first["metadata"]["uid"])

    # Someone with rights in the namespace swaps the volume under the Workspace.
    await harness.kube.delete(PVCS, LEGACY_PVC, harness.namespace)
    await harness.synced(harness.pvcs, LEGACY_PVC, None)
    swapped = await harness.kube.create(PVCS, desired_pvc(ws, LEGACY_PVC), harness.namespace)
    await harness.synced(harness.pvcs, LEGACY_PVC, swapped)
    await harness.reconcile()
    status = (await harness.workspace())["status"]
    assert status["pvcName"] == "workspace-ws1"
    assert status["pvcUID"] != swapped["metadata"]["uid"]
