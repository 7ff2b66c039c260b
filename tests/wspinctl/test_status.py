"""``wspin status``: workspace pods by the release they run, against the one served now."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.wspinctl.installation import (
    OLD_RELEASE,
    Installed,
    workspace_pod,
)
from webhook.demo import DEMO_CONFIG
from wspin.core import rollout
from wspin.core.contract import AGENTD, DELIVERY_ANNOTATION, OPENCODE
from wspin.core.kinds import PODS, WORKSPACES
from wspin.kube.client import Kube
from wspinctl import cli
from wspinctl.status import read_status, render

REPO = Path(__file__).resolve().parents[2]
CURRENT = {
    "agentd": rollout.digest_of(DEMO_CONFIG.agentd.image),
    "opencode": rollout.digest_of(DEMO_CONFIG.opencode.image),
}
# -- classification (pure) ------------------------------------------------------------------


def injected(
    agentd: str, opencode: str, *, receipt: dict[str, str] | None = None
) -> dict[str, Any]:
    volumes = [
        {"name": artifact.volume, "image": {"reference": f"r@{digest}"}}
        for artifact, digest in ((AGENTD, agentd), (OPENCODE, opencode))
    ]
    annotation = json.dumps(receipt or {"agentd": agentd, "opencode": opencode})
    return {
        "metadata": {"annotations": {DELIVERY_ANNOTATION: annotation}},
        "spec": {"volumes": volumes},
    }


def states(pod: dict[str, Any], workspace: dict[str, Any] | None = None) -> dict[str, str]:
    return {s.artifact: s.state for s in rollout.classify(pod, workspace, CURRENT)}


OLD = "sha256:" + "1" * 64


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (
            injected(CURRENT["agentd"], CURRENT["opencode"]),
            {"agentd": "current", "opencode": "current"},
        ),
        (injected(OLD, CURRENT["opencode"]), {"agentd": "stale", "opencode": "current"}),
        ({"metadata": {}, "spec": {}}, {"agentd": "not_injected", "opencode": "not_injected"}),
        # A receipt the immutable spec does not back (a tenant may rewrite annotations).
        (
            {"metadata": {"annotations": {DELIVERY_ANNOTATION: json.dumps(CURRENT)}}, "spec": {}},
            {"agentd": "not_injected", "opencode": "not_injected"},
        ),
        (
            injected(OLD, OLD, receipt=CURRENT),
            {"agentd": "not_injected", "opencode": "not_injected"},
        ),
        (
            {"metadata": {"annotations": {DELIVERY_ANNOTATION: "{not json"}}},
            {"agentd": "not_injected", "opencode": "not_injected"},
        ),
    ],
    ids=["current", "stale", "bare", "forged-receipt", "receipt-disagrees", "garbage"],
)
def test_each_artifact_is_classified_from_its_receipt_and_image_volume(
    pod: dict[str, Any], expected: dict[str, str]
) -> None:
    assert states(pod) == expected


def test_a_failed_verification_on_the_workspace_wins_over_the_digest() -> None:
    workspace = {"status": {"conditions": [{"type": "OpencodeVerified", "status": "False"}]}}
    pod = injected(CURRENT["agentd"], CURRENT["opencode"])
    assert states(pod, workspace) == {"agentd": "current", "opencode": "failing"}
    release = rollout.PodRelease("ns", "p", "ws", rollout.classify(pod, workspace, CURRENT))
    assert rollout.pod_state(release) == "failing"


def test_without_the_served_release_an_injected_pod_is_only_injected() -> None:
    pod = injected(CURRENT["agentd"], CURRENT["opencode"])
    assert {s.state for s in rollout.classify(pod, None, None)} == {"injected"}


# -- against an installation ----------------------------------------------------------------


async def test_a_pod_the_installed_webhook_injected_is_current(
    kube: Kube, installed: Installed, namespace: str
) -> None:
    await installed.admit(kube, namespace)
    await kube.create(PODS, workspace_pod(namespace, "ws1-0a1b2c3d", "ws1"), namespace)
    status = await read_status(kube, installed.install, [namespace])
    assert status.served == CURRENT
    [pod] = status.pods
    assert (pod.name, pod.workspace, rollout.pod_state(pod)) == ("ws1-0a1b2c3d", "ws1", "current")
    summary = status.as_dict()["namespaces"][0]
    assert (summary["namespace"], summary["pods"], summary["current"]) == (namespace, 1, 1)


@pytest.mark.usefixtures("breaks_installation")
async def test_a_rollout_in_progress_shows_current_stale_not_injected_and_failing_pods(
    kube: Kube, installed: Installed, namespace: str,
    kubeconfig: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    install = installed.install
    assert installed.folder is not None
    await installed.admit(kube, namespace)
    # A pod admitted while the previous release served, then the current release again.
    async with installed.serving(installed.folder / "old", OLD_RELEASE):
        await kube.create(PODS, workspace_pod(namespace, "old-0a1b2c3d", "old"), namespace)
    async with installed.serving(installed.folder / "new", DEMO_CONFIG):
        await kube.create(PODS, workspace_pod(namespace, "new-0a1b2c3d", "new"), namespace)
        await kube.create(PODS, workspace_pod(namespace, "bad-0a1b2c3d", "bad"), namespace)
        # The controller saw exit 83 on "bad": its Workspace says so (written while the
        # webhook serves: it records every Workspace's owner, failing closed).
        workspace = yaml.safe_load((REPO / "examples" / "workspace.yaml").read_text())
        workspace["metadata"] = {"name": "bad", "namespace": namespace}
        created = await kube.create(WORKSPACES, workspace, namespace)
    # The release namespace is never injected: a receipt written by hand is not believed.
    forged = workspace_pod(install.namespace, "forged-0a1b2c3d", "forged")
    forged["metadata"]["annotations"] = {DELIVERY_ANNOTATION: json.dumps(CURRENT)}
    await kube.create(PODS, forged, install.namespace)
    condition = {
        "type": "OpencodeVerified",
        "status": "False",
        "reason": "OpencodeHashMismatch",
        "message": "sha256 mismatch",
        "lastTransitionTime": "2026-12-01T10:00:00Z",
    }
    created["status"] = {"conditions": [condition]}
    await kube.replace(WORKSPACES, created, sub="status")

    status = await read_status(kube, install, [namespace, install.namespace])
    by_name = {pod.name: rollout.pod_state(pod) for pod in status.pods}
    assert by_name == {
        "old-0a1b2c3d": "stale",
        "new-0a1b2c3d": "current",
        "bad-0a1b2c3d": "failing",
        "forged-0a1b2c3d": "not_injected",
    }
    old = next(pod for pod in status.pods if pod.name == "old-0a1b2c3d")
    assert {a.artifact: a.digest for a in old.artifacts}["agentd"] == OLD

    text = render(install, status)
    assert "the webhook serves agentd sha256:0123456789ab opencode sha256:fedcba987654" in text
    assert f"{namespace}/old-0a1b2c3d  workspace old  agentd sha256:111111111111" in text
    assert "recreated with the current one on the next restartGeneration" in text

    argv = ["status", "--kubeconfig", str(kubeconfig), "-o", "json"]
    argv += ["--namespace", install.namespace, "--workspace-namespace", namespace]
    assert await asyncio.to_thread(cli.main, argv) == 0
    report = json.loads(capsys.readouterr().out)
    [summary] = report["namespaces"]
    assert (summary["current"], summary["stale"], summary["failing"]) == (1, 1, 1)
    assert report["served"] == CURRENT


async def test_status_of_a_release_that_is_not_there_exits_1_with_the_fix(
    installed: Installed, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["status", "--kubeconfig", str(kubeconfig), "--release", "no-such-release"]
    assert await asyncio.to_thread(cli.main, argv) == 1
    err = capsys.readouterr().err
    assert "no webhook Deployment no-such-release-wspin-webhook" in err
    assert "fix: pass --namespace and --release" in err
