"""The workspace password Secret the pod references: created once, owned, never exposed."""

from __future__ import annotations

import base64
import logging

import pytest

from controller.workspace.credentials import KEYS, desired_password_secret
from tests.controller.workspace.conftest import Harness
from tests.controller.workspace.factories import workspace
from wspin.core.kinds import PODS, SECRETS


def test_each_key_gets_its_own_random_value() -> None:
    secret = desired_password_secret(workspace())
    values = secret["stringData"]
    assert set(values) == set(KEYS)
    assert len(set(values.values())) == 3 and all(len(v) >= 43 for v in values.values())
    assert secret["metadata"]["name"] == "workspace-pw-ws1"
    assert secret["metadata"]["ownerReferences"][0]["kind"] == "Workspace"


async def test_the_secret_exists_before_the_pod_and_survives_a_new_pod(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await harness.apply()
    await harness.reconcile()
    await harness.reconcile()
    secret = await harness.kube.get(SECRETS, "workspace-pw-ws1", harness.namespace)
    assert set(secret["data"]) == set(KEYS)
    ws = await harness.workspace()
    assert secret["metadata"]["ownerReferences"][0]["uid"] == ws["metadata"]["uid"]
    pod = await harness.kube.get(PODS, await harness.pod_name(), harness.namespace)
    refs = {
        e["valueFrom"]["secretKeyRef"]["name"]
        for c in [*pod["spec"]["initContainers"], *pod["spec"]["containers"]]
        for e in c.get("env") or []
        if "valueFrom" in e and "secretKeyRef" in e["valueFrom"]
    }
    assert refs == {"workspace-pw-ws1"}
    # The pod references the values; none of them is in the pod spec or a log line.
    values = [base64.b64decode(v).decode() for v in secret["data"].values()]
    assert not any(v in str(pod) or v in caplog.text for v in values)

    await harness.kube.delete(PODS, pod["metadata"]["name"], harness.namespace)
    await harness.settle()
    await harness.reconcile()
    await harness.reconcile()
    kept = await harness.kube.get(SECRETS, "workspace-pw-ws1", harness.namespace)
    assert kept["data"] == secret["data"]
