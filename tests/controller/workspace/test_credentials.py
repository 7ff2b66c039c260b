"""The workspace credentials: derived, written whole before every pod, never read back, and
never taken from a Secret someone else put at their name.

Against the Kubernetes API (the test server, or a real cluster): the controller's Secret
writes are create and unconditional update only; a pod records the key its credentials came
from, and a pod the controller cannot vouch for is replaced.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
from typing import Any

import pytest

from controller.toolkit.events import COMPONENT
from controller.workspace.pod import ownership
from controller.workspace.pod.builder import desired_pod
from controller.workspace.pod.credentials import (
    ANNOTATION_CREDENTIALS_KEY,
    ANNOTATION_CREDENTIALS_ROTATION,
    KEYS,
    STATUS_ROTATION,
    desired_password_secret,
    pod_credentials,
)
from controller.workspace.reconcile.plan import Plan
from controller.workspace.reconcile.record import next_status
from tests.controller.workspace.conftest import SETTINGS, Harness
from tests.controller.workspace.factories import TEST_KEYS, credentials, workspace
from tests.kubeapi import KubeServer
from tests.support.clock import START
from wspin.core.kinds import EVENTS, PODS, SECRETS, WORKSPACES
from wspin.core.objects import Obj

SECRET = "workspace-pw-ws1"


def decoded(secret: Obj) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


async def plant(h: Harness, **extra: Any) -> None:
    """A tenant's Secret at the workspace's name, before the Workspace exists."""
    body: Obj = {
        "metadata": {"name": SECRET, "labels": {"planted": "yes"}},
        "stringData": {"password": "tenant-pw", "admin-token": "tenant-token", "x": "y"},
        **extra,
    }
    await h.kube.create(SECRETS, body, h.namespace)


def test_the_secret_carries_the_three_derived_values_owned_by_the_workspace() -> None:
    ws = workspace()
    secret = desired_password_secret(ws, credentials(ws))
    values = secret["stringData"]
    assert set(values) == set(KEYS)
    assert len(set(values.values())) == 3
    assert all(len(v) == 32 and int(v, 16) >= 0 and v == v.lower() for v in values.values())
    assert secret["metadata"]["name"] == SECRET
    assert secret["metadata"]["ownerReferences"][0]["uid"] == ws["metadata"]["uid"]
    assert secret["metadata"]["annotations"] == {ANNOTATION_CREDENTIALS_KEY: "t1"}
    assert "t1" not in repr(credentials(ws)).replace("key_id='t1'", "")


async def test_the_secret_exists_before_the_pod_and_matches_the_probes(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await harness.apply()
    await harness.reconcile()
    ws = await harness.workspace()
    secret = await harness.kube.get(SECRETS, SECRET, harness.namespace)
    values = decoded(secret)
    assert values == credentials(ws).values()
    assert secret["metadata"]["ownerReferences"][0]["uid"] == ws["metadata"]["uid"]
    pod = await harness.kube.get(PODS, await harness.pod_name(), harness.namespace)
    assert pod["metadata"]["annotations"][ANNOTATION_CREDENTIALS_KEY] == "t1"
    probe = pod["spec"]["containers"][0]["readinessProbe"]["httpGet"]["httpHeaders"][0]
    assert probe["value"] == f"Bearer {values['admin-token']}"
    # No value in a log line; the password and agentd's password are nowhere in the pod.
    assert not any(v in caplog.text for v in values.values())
    assert values["password"] not in str(pod) and values["agentdPassword"] not in str(pod)


async def test_a_planted_secret_is_overwritten_before_any_pod_uses_it(
    harness: Harness, kube_server: KubeServer
) -> None:
    await plant(harness)
    await harness.apply()
    kube_server.requests.clear()
    await harness.reconcile()
    requests = list(kube_server.requests)
    secret = await harness.kube.get(SECRETS, SECRET, harness.namespace)
    ws = await harness.workspace()
    assert decoded(secret) == credentials(ws).values()  # the tenant's keys and values are gone
    assert secret["metadata"].get("labels", {}).get("planted") is None
    assert secret["metadata"]["ownerReferences"][0]["uid"] == ws["metadata"]["uid"]
    secret_calls = [(r.method, r.path) for r in requests if "/secrets" in r.path.split("?")[0]]
    assert all(method in ("POST", "PUT") for method, _ in secret_calls), secret_calls
    writes = [method for method, _ in secret_calls]
    pod_at = next(
        i for i, r in enumerate(requests) if r.method == "POST" and r.path.endswith("/pods")
    )
    put_at = next(i for i, r in enumerate(requests) if r.method == "PUT")
    assert writes == ["POST", "PUT"] and put_at < pod_at


async def test_an_old_secret_lacking_keys_is_completed(harness: Harness) -> None:
    await harness.kube.create(
        SECRETS,
        {"metadata": {"name": SECRET}, "stringData": {"password": "old"}},
        harness.namespace,
    )
    await harness.apply()
    await harness.reconcile()
    assert set(decoded(await harness.kube.get(SECRETS, SECRET, harness.namespace))) == set(KEYS)


@pytest.mark.parametrize(
    "extra",
    [{"type": "kubernetes.io/basic-auth"}, {"immutable": True}],
    ids=["another-type", "immutable"],
)
async def test_a_secret_that_cannot_take_the_values_blocks_the_pod_and_is_named(
    harness: Harness, extra: Obj
) -> None:
    await plant(harness, **extra)
    await harness.apply()
    await harness.reconcile()
    ws = await harness.workspace()
    ready = next(c for c in ws["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["reason"], ws["status"]["phase"]) == ("PodConflict", "Pending")
    assert f"Secret '{SECRET}'" in ready["message"] and "tenant-token" not in ready["message"]
    assert await harness.kube.get_or_none(PODS, await harness.pod_name(), harness.namespace) is None
    # The controller's own; on a cluster the volume binder reports the unbound claim too.
    mine = f"reportingComponent={COMPONENT}"
    events = (await harness.kube.list(EVENTS, harness.namespace, fields=mine))["items"]
    assert [e["reason"] for e in events] == ["PodConflict"]


async def test_a_recreated_pod_keeps_the_same_values(harness: Harness) -> None:
    await harness.apply()
    await harness.reconcile()
    before = await harness.kube.get(SECRETS, SECRET, harness.namespace)
    await harness.kube.delete(PODS, await harness.pod_name(), harness.namespace, grace_seconds=0)
    await harness.settle()
    await harness.reconcile()
    after = await harness.kube.get(SECRETS, SECRET, harness.namespace)
    assert after["data"] == before["data"]


class TestRotation:
    async def running_pod_from_key(self, h: Harness, key_id: str) -> Obj:
        """A pod built by a controller whose active key was ``key_id``."""
        await h.apply()
        ws = await h.workspace()
        pod = desired_pod(ws, SETTINGS, credentials=credentials(ws, key_id))
        await h.create_account(ws)
        created = await h.kube.create(PODS, ownership.stamp(pod, ws), h.namespace)
        await h.synced(h.pods, created["metadata"]["name"], created)
        return created

    async def test_a_pod_from_an_older_key_keeps_running_after_a_rotation(
        self, harness: Harness
    ) -> None:
        pod = await self.running_pod_from_key(harness, "t0")  # t1 is active now
        await harness.reconcile()
        live = await harness.kube.get(PODS, pod["metadata"]["name"], harness.namespace)
        assert live["metadata"]["uid"] == pod["metadata"]["uid"]
        ws = await harness.workspace()
        assert pod_credentials(live, ws, TEST_KEYS) == credentials(ws, "t0")

    async def test_a_pod_from_a_retired_key_is_replaced_with_the_active_key(
        self, harness: Harness
    ) -> None:
        pod = await self.running_pod_from_key(harness, "t0")
        harness.use(keys=dataclasses.replace(TEST_KEYS, keys={"t1": TEST_KEYS.keys["t1"]}))
        await harness.reconcile()
        ws = await harness.workspace()
        assert ws["status"]["restartCount"] == 1
        assert (
            "retired"
            in next(c for c in ws["status"]["conditions"] if c["type"] == "Ready")["message"]
        )
        await harness.synced(harness.pods, pod["metadata"]["name"], None)
        await harness.reconcile()
        fresh = await harness.kube.get(PODS, pod["metadata"]["name"], harness.namespace)
        assert fresh["metadata"]["annotations"][ANNOTATION_CREDENTIALS_KEY] == "t1"
        secret = await harness.kube.get(SECRETS, SECRET, harness.namespace)
        assert decoded(secret) == credentials(ws, "t1").values()

    @pytest.mark.parametrize("annotation", [None, "t0"], ids=["missing", "edited"])
    async def test_a_pod_whose_probes_do_not_match_its_key_is_replaced(
        self, harness: Harness, annotation: str | None
    ) -> None:
        pod = await self.running_pod_from_key(harness, "t1")
        annotations = dict(pod["metadata"]["annotations"])
        if annotation is None:
            annotations.pop(ANNOTATION_CREDENTIALS_KEY)
        else:
            annotations[ANNOTATION_CREDENTIALS_KEY] = annotation
        patched = await harness.kube.patch(
            PODS,
            pod["metadata"]["name"],
            {"metadata": {"annotations": {ANNOTATION_CREDENTIALS_KEY: annotation}}},
            harness.namespace,
        )
        await harness.synced(harness.pods, pod["metadata"]["name"], patched)
        await harness.reconcile()
        gone = await harness.kube.get_or_none(PODS, pod["metadata"]["name"], harness.namespace)
        assert gone is None or gone["metadata"].get("deletionTimestamp")
        ws = await harness.kube.get(WORKSPACES, "ws1", harness.namespace)
        assert ws["status"]["restartCount"] == 1


def test_a_foreign_bearer_of_any_characters_is_refused_not_crashed_on() -> None:
    ws = workspace()
    pod = desired_pod(ws, SETTINGS, credentials=credentials(ws))
    header = pod["spec"]["containers"][0]["readinessProbe"]["httpGet"]["httpHeaders"][0]
    header["value"] = "Bearer \u00fc\u00df\ud83d\ude00"
    assert pod_credentials(pod, ws, TEST_KEYS) == "the pod's probes do not carry its admin token"
    del pod["spec"]["containers"][0]["readinessProbe"]
    assert isinstance(pod_credentials(pod, ws, TEST_KEYS), str)


def bearer(pod: Obj) -> str:
    """The admin token the pod's readiness probe carries."""
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "workspace"]
    headers = container["readinessProbe"]["httpGet"]["httpHeaders"]
    return str(next(h["value"] for h in headers if h["name"] == "Authorization"))


class TestAdminTokenRotation:
    """Rule: agentd's admin token is derived from the key, the uid and a rotation every
    recycle advances and the status keeps (never down): once read, it is valid only until
    the next recycle, never for the Workspace's whole life, and never valid again."""

    def test_a_recycle_rotates_the_token_and_setting_it_back_revives_nothing(self) -> None:
        ws = workspace()
        first = credentials(ws)
        bumped = credentials(workspace(restartGeneration=1))
        assert bumped.admin_token != first.admin_token
        assert (bumped.password, bumped.agentd_password) == (first.password, first.agentd_password)
        back = workspace(restartGeneration=0)
        back["status"] = {STATUS_ROTATION: 1}
        assert credentials(back).admin_token == bumped.admin_token, "a rotated token came back"
        other_key = credentials(workspace(restartGeneration=1), "t0")
        assert other_key.admin_token not in (first.admin_token, bumped.admin_token)

    def test_the_status_keeps_the_highest_rotation_built(self) -> None:
        ws = workspace(restartGeneration=1)
        ws["status"] = {STATUS_ROTATION: 3}
        outcome = Plan("Pending", restart_generation=1)
        new = next_status(ws["status"], outcome, ws, START)
        assert new[STATUS_ROTATION] == 3

    def test_a_pod_vouches_for_the_rotation_it_was_built_with(self) -> None:
        ws = workspace(restartGeneration=2)
        pod = desired_pod(ws, SETTINGS, credentials=credentials(ws))
        assert pod["metadata"]["annotations"][ANNOTATION_CREDENTIALS_ROTATION] == "2"
        assert pod_credentials(pod, ws, TEST_KEYS) == credentials(ws)
        pod["metadata"]["annotations"][ANNOTATION_CREDENTIALS_ROTATION] = "1"  # edited
        assert isinstance(pod_credentials(pod, ws, TEST_KEYS), str)

    async def test_a_recycle_replaces_the_token_in_the_pod_and_the_secret(
        self, harness: Harness
    ) -> None:
        await harness.apply()
        await harness.reconcile()
        first = await harness.kube.get(PODS, await harness.pod_name(), harness.namespace)
        old_token = decoded(await harness.kube.get(SECRETS, SECRET, harness.namespace))[
            "admin-token"
        ]
        assert bearer(first) == f"Bearer {old_token}"
        await harness.kube.patch(
            WORKSPACES, "ws1", {"spec": {"restartGeneration": 1}}, harness.namespace
        )
        pod = None
        for _ in range(100):
            await harness.settle()
            await harness.reconcile()
            pod = await harness.kube.get_or_none(PODS, await harness.pod_name(), harness.namespace)
            if pod and pod["metadata"]["uid"] != first["metadata"]["uid"]:
                break
        assert pod is not None and pod["metadata"]["uid"] != first["metadata"]["uid"]
        new_token = decoded(await harness.kube.get(SECRETS, SECRET, harness.namespace))[
            "admin-token"
        ]
        assert new_token != old_token
        assert bearer(pod) == f"Bearer {new_token}"
        assert old_token not in str(pod)
        await harness.reconcile()
        assert (await harness.workspace())["status"][STATUS_ROTATION] == 1


def test_a_workspace_recreated_under_the_same_name_gets_new_credentials() -> None:
    """Rule: every value is derived from the Workspace's uid, never its namespace and name: a
    Workspace deleted and created again under the same name (a new uid) must not inherit its
    predecessor's password, admin token or sidecar password."""
    first = workspace()
    again = workspace()
    again["metadata"]["uid"] = "f" * 8 + first["metadata"]["uid"][8:]
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    before, after = credentials(first).values(), credentials(again).values()
    for key in KEYS:
        assert before[key] != after[key], key
    elsewhere = workspace()
    elsewhere["metadata"]["namespace"] = "another-team"
    assert credentials(elsewhere).values() == before, "the uid alone decides"
