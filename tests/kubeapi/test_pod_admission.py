"""The admission plugins every v1.32 API server runs on a pod create: the pod's
ServiceAccount and RuntimeClass must exist. Only ``kube``/``namespace`` are used, so these hold
against a real cluster too (which is where the test server was found lacking them)."""

from __future__ import annotations

import uuid

import pytest

from tests.support.runtime_classes import RUNTIME_CLASSES, ensure_runtime_class
from tests.support.waiting import eventually
from wspin.core.errors import Forbidden, NotFound
from wspin.core.kinds import PODS, SERVICE_ACCOUNTS
from wspin.core.objects import Obj
from wspin.kube.client import Kube


def _pod(name: str, **spec: object) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}], **spec},
    }


@pytest.mark.parametrize("dry_run", [False, True], ids=["create", "dry-run"])
async def test_a_pod_naming_a_missing_service_account_is_refused_until_it_exists(
    kube: Kube, namespace: str, dry_run: bool
) -> None:
    with pytest.raises(Forbidden) as refused:
        await kube.create(PODS, _pod("p", serviceAccountName="agent"), namespace, dry_run=dry_run)
    assert refused.value.message.endswith(
        f'pods "p" is forbidden: error looking up service account {namespace}/agent: '
        'serviceaccount "agent" not found'
    )
    with pytest.raises(NotFound):
        await kube.get(PODS, "p", namespace)

    await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": "agent"}}, namespace)
    created = await kube.create(PODS, _pod("p", serviceAccountName="agent"), namespace)
    assert created["spec"]["serviceAccountName"] == "agent"


async def test_a_pod_naming_no_account_runs_as_the_namespaces_default_one(
    kube: Kube, namespace: str
) -> None:
    # The controller manager's ServiceAccount controller makes it, asynchronously on a cluster.
    async def default_account() -> bool:
        return await kube.get_or_none(SERVICE_ACCOUNTS, "default", namespace) is not None

    await eventually(default_account, "the namespace's default ServiceAccount", timeout=60)
    created = await kube.create(PODS, _pod("p"), namespace)
    assert created["spec"]["serviceAccountName"] == "default"


async def test_a_refusal_names_a_generated_pod_by_its_prefix(kube: Kube, namespace: str) -> None:
    body = _pod("", serviceAccountName="agent")
    body["metadata"] = {"generateName": "gen-"}
    with pytest.raises(Forbidden) as refused:
        await kube.create(PODS, body, namespace)
    assert 'pods "gen-" is forbidden: error looking up service account' in refused.value.message


@pytest.mark.parametrize("dry_run", [False, True], ids=["create", "dry-run"])
async def test_a_pod_naming_a_missing_runtime_class_is_refused_until_it_exists(
    kube: Kube, namespace: str, dry_run: bool
) -> None:
    wanted = f"wspin-test-{uuid.uuid4().hex[:10]}"
    with pytest.raises(Forbidden) as refused:
        await kube.create(PODS, _pod("p", runtimeClassName=wanted), namespace, dry_run=dry_run)
    assert refused.value.message.endswith(
        f'pods "p" is forbidden: pod rejected: RuntimeClass "{wanted}" not found'
    )
    with pytest.raises(NotFound):
        await kube.get(PODS, "p", namespace)

    await ensure_runtime_class(kube, wanted)
    try:
        created = await kube.create(PODS, _pod("p", runtimeClassName=wanted), namespace)
        assert created["spec"]["runtimeClassName"] == wanted
    finally:
        await kube.delete(RUNTIME_CLASSES, wanted)
