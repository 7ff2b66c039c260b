"""The pods the Workspace controller creates, as the API server stores them, in both modes.

The reconciler creates the pod through the API; the stored pod must keep everything agentd
needs (init containers, probes, the projected token, resources). Then the stored pod goes
through the real admission webhook over HTTPS, and the injected pod is created (server-side
dry run) and must keep the delivery wiring too. Runs unchanged against a real cluster.
"""

from __future__ import annotations

import base64
import dataclasses
import json

import jsonpatch
import pytest

from tests.controller.workspace.conftest import Harness
from tests.webhook.conftest import LiveWebhook, webhook
from wspin.core.contract import PLATFORM_BOOTSTRAP, PLATFORM_INIT, PLATFORM_MATERIALIZE
from wspin.core.kinds import PODS
from wspin.core.objects import Obj
from wspin.core.quantity import parse_quantity as amount

__all__ = ["webhook"]  # the live HTTPS webhook fixture

RESOURCES = {"cpu": "500m", "memory": "1Gi", "cpuLimit": "2.0", "memoryLimit": "4Gi"}


async def created_pod(harness: Harness, *, sidecar: bool) -> Obj:
    base = harness.reconciler.deps
    harness.use(settings=dataclasses.replace(base.settings, agentd_sidecar=sidecar))
    await harness.apply(resources=RESOURCES, packages=[{"requirements": ["requests"]}])
    await harness.reconcile()
    await harness.reconcile()  # finalizer, PVC and pod may take two passes
    stored: Obj = await harness.kube.get(PODS, await harness.pod_name(), harness.namespace)
    return stored


async def injected_through_the_webhook(webhook: LiveWebhook, pod: Obj, namespace: str) -> Obj:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0f0e0d0c-0000-4000-8000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": namespace,
            "object": pod,
        },
    }
    response = await webhook.post(review)
    assert response.status == 200
    answer = (await response.json())["response"]
    assert answer["allowed"] is True
    patch = json.loads(base64.b64decode(answer["patch"])) if answer.get("patch") else []
    result: Obj = jsonpatch.apply_patch(pod, patch)
    return result


def _fresh(pod: Obj, name: str) -> Obj:
    """``pod`` as a new create body: server-set metadata and status dropped."""
    meta = {k: v for k, v in pod["metadata"].items() if k in ("labels", "annotations")}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**meta, "name": name},
        "spec": pod["spec"],
    }


@pytest.mark.parametrize("sidecar", [False, True], ids=["single", "sidecar"])
async def test_the_created_pod_is_stored_whole_and_injected(
    harness: Harness, webhook: LiveWebhook, sidecar: bool
) -> None:
    pod = await created_pod(harness, sidecar=sidecar)
    spec = pod["spec"]
    inits = [c["name"] for c in spec["initContainers"]]
    if sidecar:
        assert inits == [PLATFORM_INIT, "workspace-setup", "agentd"]
        assert spec["initContainers"][-1]["restartPolicy"] == "Always"
        assert spec["initContainers"][-1]["startupProbe"]["httpGet"]["path"] == "/v1/healthz"
    else:
        assert inits == [PLATFORM_INIT, "workspace-setup", PLATFORM_BOOTSTRAP, PLATFORM_MATERIALIZE]
    main = spec["containers"][0]
    assert main["readinessProbe"]["httpGet"]["path"] == "/v1/readyz"
    assert main["startupProbe"]["failureThreshold"] == 180  # a cold image-volume pull fits
    assert ("tcpSocket" in main["livenessProbe"]) == sidecar
    # The API server stores quantities canonically ("2.0" → "2"): compare amounts.
    assert {
        section: {name: amount(value) for name, value in values.items()}
        for section, values in main["resources"].items()
    } == {
        "requests": {"cpu": amount("500m"), "memory": amount("1Gi")},
        "limits": {"cpu": amount("2"), "memory": amount("4Gi")},
    }
    volumes = {v["name"]: v for v in spec["volumes"]}
    token = volumes["bootstrap-token"]["projected"]["sources"][0]["serviceAccountToken"]
    assert (token["audience"], token["expirationSeconds"]) == ("llmsafespace-api", 600)
    assert ({"agentd-config", "agentd-secrets"} <= set(volumes)) == sidecar

    wired = await injected_through_the_webhook(webhook, pod, harness.namespace)
    again = await harness.kube.create(
        PODS, _fresh(wired, pod["metadata"]["name"] + "-x"), harness.namespace, dry_run=True
    )
    volumes = {v["name"]: v for v in again["spec"]["volumes"]}
    assert volumes["agentd"]["image"]["pullPolicy"] == "IfNotPresent"
    assert volumes["opencode"]["image"]["pullPolicy"] == "IfNotPresent"
    for container in [*again["spec"]["initContainers"], *again["spec"]["containers"]]:
        mounts = {m["mountPath"] for m in container.get("volumeMounts") or []}
        runs_agentd = container["name"] in ("workspace", "agentd") or container["name"].startswith(
            "platform-"
        )
        assert ("/agentd" in mounts) == runs_agentd, container["name"]
        assert ("/opencode" in mounts) == (container["name"] == "workspace"), container["name"]
