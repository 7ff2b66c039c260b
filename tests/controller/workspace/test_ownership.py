"""The controller adopts only what it created: foreign objects at a Workspace's names are
reported and left alone, whatever owner reference their creator wrote (pure decisions, then the
reconciler against the API)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from controller.toolkit.episodes import is_new
from controller.workspace.pod.ownership import (
    CONFLICT_REASON,
    conflict_of,
    recorded,
    stamp,
)
from controller.workspace.reconcile.reconciler import WorkspaceReconciler
from tests.controller.workspace.conftest import SETTINGS, Harness, reconcile_deps
from tests.controller.workspace.factories import UID, workspace
from wspin.core.contract import LABEL_WORKSPACE_UID
from wspin.core.kinds import EVENTS, PODS, PVCS, SERVICE_ACCOUNTS, WORKSPACES
from wspin.core.objects import Obj


def ref(uid: str = UID, *, controller: bool = True, kind: str = "Workspace") -> Obj:
    return {
        "apiVersion": "llmsafespaces.dev/v1",
        "kind": kind,
        "name": "ws1",
        "uid": uid,
        "controller": controller,
    }


def obj(*refs: Obj, labelled: str | None = UID) -> Obj:
    """An object with ``refs``, labelled with ``labelled`` as its Workspace uid (None: not)."""
    meta: Obj = {"name": "ws1-b8985526"}
    if refs:
        meta["ownerReferences"] = list(refs)
    if labelled is not None:
        meta["labels"] = {LABEL_WORKSPACE_UID: labelled}
    return {"metadata": meta}


class TestDecision:
    def test_an_unlabelled_object_older_than_the_key_is_an_earlier_releases_own(self) -> None:
        """Earlier releases labelled nothing; a creation time cannot be backdated."""
        cutoff = datetime(2026, 6, 1, tzinfo=UTC)
        old, new = obj(ref(), labelled=None), obj(ref(), labelled=None)
        old["metadata"]["creationTimestamp"] = "2026-05-31T23:59:59Z"
        new["metadata"]["creationTimestamp"] = "2026-06-01T00:00:00Z"
        assert conflict_of(old, workspace(), "Pod", legacy_before=cutoff) is None
        assert conflict_of(new, workspace(), "Pod", legacy_before=cutoff) is not None
        assert conflict_of(old, workspace(), "Pod") is not None  # no key date: nothing predates
        # The owner reference still decides: another Workspace's old object is not ours, and
        # neither is one labelled for another Workspace.
        other = obj(ref("11111111-2222-3333-4444-555555555555"), labelled=None)
        other["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
        assert conflict_of(other, workspace(), "Pod", legacy_before=cutoff) is not None
        mislabelled = obj(ref(), labelled="11111111-2222-3333-4444-555555555555")
        mislabelled["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
        assert conflict_of(mislabelled, workspace(), "Pod", legacy_before=cutoff) is not None

    def test_an_object_the_controller_created_for_the_workspace_is_its_own(self) -> None:
        assert conflict_of(obj(ref()), workspace(), "Pod") is None
        assert (
            conflict_of(stamp(obj(ref(), labelled=None), workspace()), workspace(), "Pod") is None
        )

    @pytest.mark.parametrize("labelled", [None, "11111111-2222-3333-4444-555555555555", ""])
    def test_a_forged_owner_reference_without_the_controllers_label_is_a_conflict(
        self, labelled: str | None
    ) -> None:
        """The owner reference is whatever its creator wrote: a tenant can read the uid."""
        found = conflict_of(obj(ref(), labelled=labelled), workspace(), "Pod")
        assert found is not None and LABEL_WORKSPACE_UID in found.message

    def test_nothing_there_is_no_conflict(self) -> None:
        assert conflict_of(None, workspace(), "Pod") is None

    @pytest.mark.parametrize(
        ("refs", "words"),
        [
            ((), "no controller ownerReference"),
            ((ref(controller=False),), "no controller ownerReference"),
            ((ref(uid="11111111-2222-3333-4444-555555555555"),), "11111111-2222"),
            ((ref(kind="ReplicaSet"),), "ReplicaSet"),
            (({**ref(), "apiVersion": "evil.example/v1"},), "Workspace 'ws1'"),
        ],
    )
    def test_anything_else_is_a_conflict_naming_the_object(
        self, refs: tuple[Obj, ...], words: str
    ) -> None:
        found = conflict_of(obj(*refs), workspace(), "Pod")
        assert found is not None
        assert "Pod 'ws1-b8985526'" in found.message
        assert words in found.message

    def test_an_episode_is_new_until_the_status_reports_the_same_conflict(self) -> None:
        found = conflict_of(obj(), workspace(), "Pod")
        assert found is not None
        reported = {
            "type": "Ready",
            "status": "False",
            "reason": CONFLICT_REASON,
            "message": found.message,
        }

        def reporting(*conditions: Obj) -> Obj:
            return {**workspace(), "status": {"conditions": list(conditions)}}

        assert is_new(reporting(), recorded(found))
        assert not is_new(reporting(reported), recorded(found))
        assert is_new(reporting({**reported, "reason": "PodPending"}), recorded(found))


# -- against the API -------------------------------------------------------------------------


async def events(h: Harness, name: str = "ws1") -> list[Obj]:
    listing = await h.kube.list(EVENTS, h.namespace, fields=f"involvedObject.name={name}")
    return [e for e in listing.get("items") or [] if e.get("reason") == CONFLICT_REASON]


def squatter(name: str, namespace: str, labels: dict[str, str]) -> Obj:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "nodeSelector": {"kubernetes.io/arch": "amd64"},
            "containers": [{"name": "workspace", "image": "docker.io/attacker/anything:1"}],
        },
    }


async def reconcile(h: Harness) -> None:
    """One reconcile, then the Workspace cache caught up (the pod cache never holds an
    unlabelled squatter, so ``Harness.reconcile`` would wait for it in vain)."""
    await h.reconciler.reconcile(h.key())
    live = await h.kube.get_or_none(WORKSPACES, "ws1", h.namespace)
    await h.synced(h.workspaces, "ws1", live)


def ready(ws: Obj) -> Obj:
    found: Obj = next(c for c in ws["status"]["conditions"] if c["type"] == "Ready")
    return found


@pytest.mark.parametrize(
    "labels",
    [{}, {"app": "llmsafespaces", "component": "workspace"}],
    ids=["unlabelled", "selector-labels"],
)
async def test_a_squatting_pod_is_never_adopted_and_is_reported_once(
    harness: Harness, labels: dict[str, str]
) -> None:
    h = harness
    await h.apply()
    name = await h.pod_name()
    planted = await h.kube.create(PODS, squatter(name, h.namespace, labels), h.namespace)
    for _ in range(3):
        await reconcile(h)
    ws = await h.workspace()
    assert ws["status"]["phase"] != "Active"
    condition = ready(ws)
    assert (condition["status"], condition["reason"]) == ("False", "PodConflict")
    assert name in condition["message"]
    assert len(await events(h)) == 1
    pod = await h.kube.get(PODS, name, h.namespace)
    assert pod["metadata"]["uid"] == planted["metadata"]["uid"]
    assert pod["spec"]["containers"][0]["image"] == "docker.io/attacker/anything:1"
    assert "ownerReferences" not in pod["metadata"]


async def test_a_running_squatter_never_makes_the_workspace_active(harness: Harness) -> None:
    h = harness
    await h.apply()
    name = await h.pod_name()
    labels = {
        "app": "llmsafespaces",
        "component": "workspace",
        "llmsafespaces.dev/workspace": "ws1",
    }
    await h.kube.create(PODS, squatter(name, h.namespace, labels), h.namespace)
    await h.settle()
    await h.reconcile()
    await h.set_pod_status(
        name,
        {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    )
    await reconcile(h)
    ws = await h.workspace()
    assert ws["status"]["phase"] == "Pending"
    assert ready(ws)["reason"] == "PodConflict"


async def test_deleting_the_workspace_leaves_a_foreign_pod_alone(harness: Harness) -> None:
    h = harness
    await h.apply()
    name = await h.pod_name()
    await h.kube.create(PODS, squatter(name, h.namespace, {}), h.namespace)
    await reconcile(h)
    await h.kube.delete(WORKSPACES, "ws1", h.namespace)
    for _ in range(2):
        await reconcile(h)
    assert await h.kube.get_or_none(WORKSPACES, "ws1", h.namespace) is None
    pod = await h.kube.get(PODS, name, h.namespace)
    assert not pod["metadata"].get("deletionTimestamp")


async def test_a_foreign_pvc_blocks_the_pod_and_is_named(harness: Harness) -> None:
    h = harness
    await h.apply()
    pvc = {
        "metadata": {"name": "workspace-ws1", "namespace": h.namespace},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    await h.kube.create(PVCS, pvc, h.namespace)
    await reconcile(h)
    ws = await h.workspace()
    condition = ready(ws)
    assert condition["reason"] == "PodConflict"
    assert "PersistentVolumeClaim 'workspace-ws1'" in condition["message"]
    assert await h.kube.get_or_none(PODS, await h.pod_name(), h.namespace) is None
    assert len(await events(h)) == 1


async def test_a_foreign_service_account_blocks_the_pod_and_is_named(harness: Harness) -> None:
    h = harness
    await h.apply()
    account = {"metadata": {"name": "workspace-ws1", "namespace": h.namespace}}
    await h.kube.create(SERVICE_ACCOUNTS, account, h.namespace)
    await reconcile(h)
    condition = ready(await h.workspace())
    assert condition["reason"] == "PodConflict"
    assert "ServiceAccount 'workspace-ws1'" in condition["message"]
    assert await h.kube.get_or_none(PODS, await h.pod_name(), h.namespace) is None


async def test_a_planted_pod_with_a_forged_owner_reference_is_not_adopted(
    harness: Harness,
) -> None:
    """The owner reference names the Workspace's uid (any reader of the Workspace knows it), and
    the pod carries the workspace labels: only the controller's label is missing."""
    h = harness
    ws = await h.apply()
    name = await h.pod_name()
    labels = {
        "app": "llmsafespaces",
        "component": "workspace",
        "llmsafespaces.dev/workspace": "ws1",
    }
    body = squatter(name, h.namespace, labels)
    body["metadata"]["ownerReferences"] = [
        {**ref(ws["metadata"]["uid"]), "blockOwnerDeletion": True}
    ]
    await h.kube.create(PODS, body, h.namespace)
    await h.settle()
    await h.reconcile()
    condition = ready(await h.workspace())
    assert condition["reason"] == "PodConflict"
    assert LABEL_WORKSPACE_UID in condition["message"]


async def test_once_the_squatter_is_gone_the_workspace_gets_its_own_pod(harness: Harness) -> None:
    h = harness
    await h.apply()
    name = await h.pod_name()
    await h.kube.create(PODS, squatter(name, h.namespace, {}), h.namespace)
    await reconcile(h)
    await h.kube.delete(PODS, name, h.namespace, grace_seconds=0)
    await h.reconcile()
    pod = await h.kube.get(PODS, name, h.namespace)
    (owner,) = pod["metadata"]["ownerReferences"]
    assert owner["uid"] == (await h.workspace())["metadata"]["uid"]
    assert ready(await h.workspace())["reason"] != "PodConflict"


async def test_no_pod_is_built_for_a_workspace_in_an_excluded_namespace(harness: Harness) -> None:
    h = harness
    settings = dataclasses.replace(
        SETTINGS, excluded_namespaces=frozenset({"kube-system", h.namespace})
    )
    reconciler = WorkspaceReconciler(reconcile_deps(h.kube, h.workspaces, h.pods, h.pvcs, settings))
    await h.apply()
    await reconciler.reconcile(h.key())
    ws = await h.workspace()
    assert ws["status"]["phase"] == "Failed"
    condition = ready(ws)
    assert condition["status"] == "False"
    assert f"namespace {h.namespace!r} is excluded" in condition["message"]
    assert await h.kube.get_or_none(PODS, await h.pod_name(), h.namespace) is None
    assert await h.kube.get_or_none(PVCS, "workspace-ws1", h.namespace) is None
