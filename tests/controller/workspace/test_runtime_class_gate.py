"""The runtime-class override through the Workspace reconciler (runs unchanged on a real
cluster): the platform decides it, by the namespace's label or the operator's allow list, and
the controller checks again before it builds a pod, whatever was admitted before."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from controller.workspace.pod.refusals import ADMISSION_REFUSED, POD_ADMITTED
from tests.controller.workspace.conftest import Harness
from tests.support.runtime_classes import RUNTIME_CLASSES, ensure_runtime_class
from wspin.core.kinds import PODS, WORKSPACES
from wspin.core.tenancy import LABEL_RUNTIME_CLASS_OVERRIDE, RUNTIME_CLASSES_FLAG


async def runtime_class_of_pod(harness: Harness) -> str | None:
    pod = await harness.kube.get_or_none(PODS, await harness.pod_name(), harness.namespace)
    assert pod is not None
    found: str | None = pod["spec"].get("runtimeClassName")
    return found


async def test_an_override_the_platform_did_not_allow_builds_no_pod(harness: Harness) -> None:
    await ensure_runtime_class(harness.kube, "runc")  # on the nodes; the gate is the question
    await harness.apply(runtimeClass="runc")
    await harness.reconcile()
    ws = await harness.workspace()
    assert ws["status"]["phase"] == "Failed"
    assert LABEL_RUNTIME_CLASS_OVERRIDE in ws["status"]["message"]
    assert RUNTIME_CLASSES_FLAG in ws["status"]["message"]
    assert await harness.kube.get_or_none(PODS, await harness.pod_name(), harness.namespace) is None

    await harness.label_namespace({LABEL_RUNTIME_CLASS_OVERRIDE: "true"})
    await harness.reconcile()
    assert await runtime_class_of_pod(harness) == "runc"


@pytest.mark.parametrize("where", ["annotations", "labels"])
async def test_the_tenants_own_annotation_or_label_opens_nothing(
    harness: Harness, where: str
) -> None:
    """Rule: the controller's gate reads the override from the Namespace's label only, never
    from the Workspace's own labels or annotations, which its tenant writes."""
    await harness.apply(runtimeClass="")
    await harness.kube.patch(
        WORKSPACES,
        "ws1",
        {"metadata": {where: {LABEL_RUNTIME_CLASS_OVERRIDE: "true"}}},
        harness.namespace,
    )
    await harness.settle()
    await harness.reconcile()
    ws = await harness.workspace()
    assert ws["metadata"][where][LABEL_RUNTIME_CLASS_OVERRIDE] == "true"
    assert ws["status"]["phase"] == "Failed"
    assert LABEL_RUNTIME_CLASS_OVERRIDE in ws["status"]["message"]
    assert await harness.kube.get_or_none(PODS, await harness.pod_name(), harness.namespace) is None


async def test_an_allow_listed_class_runs_in_any_namespace(harness: Harness) -> None:
    harness.use(
        settings=dataclasses.replace(
            harness.reconciler.deps.settings, allowed_runtime_classes=frozenset({"kata"})
        )
    )
    await ensure_runtime_class(harness.kube, "kata")
    await harness.apply(runtimeClass="kata")
    await harness.reconcile()
    assert await runtime_class_of_pod(harness) == "kata"


async def test_a_class_the_cluster_lacks_is_shown_and_the_pod_follows_once_it_exists(
    harness: Harness,
) -> None:
    missing = f"wspin-test-{uuid.uuid4().hex[:10]}"
    harness.use(
        settings=dataclasses.replace(
            harness.reconciler.deps.settings, allowed_runtime_classes=frozenset({missing})
        )
    )
    await harness.apply(runtimeClass=missing)
    await harness.reconcile()
    status = (await harness.workspace())["status"]
    assert (status["phase"], status["reason"]) == ("Pending", ADMISSION_REFUSED)
    assert f'RuntimeClass "{missing}" not found' in status["message"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", ADMISSION_REFUSED)
    admitted = next(c for c in status["conditions"] if c["type"] == POD_ADMITTED)
    assert (admitted["status"], admitted["reason"]) == ("False", "AdmissionRefused")
    assert await harness.kube.get_or_none(PODS, await harness.pod_name(), harness.namespace) is None

    await ensure_runtime_class(harness.kube, missing)
    try:
        await harness.reconcile()
        assert await runtime_class_of_pod(harness) == missing
        status = (await harness.workspace())["status"]
        assert status["phase"] == "Pending" and "reason" not in status
    finally:
        await harness.kube.delete(RUNTIME_CLASSES, missing)
