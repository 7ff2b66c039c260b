"""``kubectl get workspaces``, ``wspin status`` and the dashboards show the same numbers.

One rollout in progress on an installation: Workspaces in several phases, workspace pods on the
current release, an older one, and failing verification. The same objects are read three ways:
the PHASE column ``kubectl get workspaces`` prints (the CRD's printer column), ``wspin status
-o json``, and the dashboards' own panel queries, evaluated by promtool over what the
controller's collectors export for those objects (from two replicas, as the chart runs it).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.workspace.reconcile.fleet_metrics import WorkspaceFleetCollector
from controller.workspace.reconcile.rollout_metrics import WorkspacePodsCollector, digest_label
from tests.chart.dashboards import concrete, queries, rendered_dashboards
from tests.chart.helm import CHART, render
from tests.chart.promtool import run_promtool
from tests.wspinctl.installation import OLD_RELEASE, Installed, workspace_pod
from webhook.demo import DEMO_CONFIG
from wspin.core.kinds import PODS, WORKSPACES
from wspin.core.workspace_pod import SELECTOR
from wspin.kube.client import Kube
from wspinctl import cli

REPO = Path(__file__).resolve().parents[2]

PHASES = {"old": "Active", "new": "Active", "bad": "Creating", "idle": "Suspended", "fresh": None}
REPLICAS = ("wspin-controller-a", "wspin-controller-b")
TARGET = 'job="wspin-controller-metrics",namespace="wspin"'


class Listed:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def list(self) -> list[dict[str, Any]]:
        return self.items


def printer_column(crd_column: str, item: dict[str, Any]) -> str:
    """What kubectl prints for a simple ``.a.b`` printer column ("" when absent)."""
    value: Any = item
    for key in crd_column.lstrip(".").split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def kubectl_phases(items: list[dict[str, Any]]) -> Counter[str]:
    crd = yaml.safe_load((CHART / "crds" / "workspaces.llmsafespaces.dev.yaml").read_text())
    (column,) = [
        c for c in crd["spec"]["versions"][0]["additionalPrinterColumns"] if c["name"] == "Phase"
    ]
    # A Workspace the controller has not written a phase on yet prints blank: it is Pending.
    return Counter(printer_column(column["jsonPath"], item) or "Pending" for item in items)


def series(exposition: str) -> list[dict[str, str]]:
    """The exposition's samples as promtool input series, once per controller replica."""
    found = []
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            for replica in REPLICAS:
                selector = ",".join(filter(None, [TARGET, f'pod="{replica}"', labels]))
                found.append(
                    {"series": f"{sample.name}{{{selector}}}", "values": f"{sample.value:g}x5"}
                )
    return found


def expect(expr: str, by: str, counts: dict[str, int]) -> dict[str, Any]:
    return {
        "expr": expr,
        "eval_time": "2m",
        "exp_samples": [
            {"labels": f'{{{by}="{k}"}}', "value": v} for k, v in sorted(counts.items())
        ],
    }


@pytest.mark.usefixtures("breaks_installation")
async def test_kubectl_wspin_status_and_the_dashboards_show_the_same_numbers(
    kube: Kube, installed: Installed, namespace: str,
    kubeconfig: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:  # fmt: skip
    install = installed.install
    assert installed.folder is not None
    await installed.admit(kube, namespace)
    async with installed.serving(installed.folder / "old", OLD_RELEASE):
        await kube.create(PODS, workspace_pod(namespace, "old-0a1b2c3d", "old"), namespace)
    async with installed.serving(installed.folder / "new", DEMO_CONFIG):
        for name in ("new", "bad"):
            await kube.create(PODS, workspace_pod(namespace, f"{name}-0a1b2c3d", name), namespace)
        # Written while the webhook serves: it records every Workspace's owner, failing closed.
        example = yaml.safe_load((REPO / "examples" / "workspace.yaml").read_text())
        made = {
            name: await kube.create(
                WORKSPACES,
                {**example, "metadata": {"name": name, "namespace": namespace}},
                namespace,
            )
            for name in PHASES
        }
    for name, phase in PHASES.items():
        created = made[name]
        if phase is None:
            continue
        created["status"] = {"phase": phase}
        if name == "bad":
            created["status"]["conditions"] = [
                {
                    "type": "OpencodeVerified",
                    "status": "False",
                    "reason": "OpencodeVerificationFailed",
                    "message": "sha256 mismatch",
                    "lastTransitionTime": "2026-12-01T10:00:00Z",
                }
            ]
        await kube.replace(WORKSPACES, created, sub="status")

    # kubectl get workspaces
    workspaces = (await kube.list(WORKSPACES, namespace))["items"]
    kubectl = kubectl_phases(workspaces)
    assert kubectl == {"Active": 2, "Creating": 1, "Suspended": 1, "Pending": 1}

    # wspin status -o json
    argv = ["status", "--kubeconfig", str(kubeconfig), "--namespace", install.namespace]
    argv += ["-o", "json"]
    assert await asyncio.to_thread(cli.main, [*argv, "--workspace-namespace", namespace]) == 0
    report = json.loads(capsys.readouterr().out)
    assert await asyncio.to_thread(cli.main, [*argv[:-2], "--workspace-namespace", namespace]) == 0
    assert "workspaces: 1 Pending, 1 Creating, 2 Active, 1 Suspended\n" in capsys.readouterr().out
    assert {k: v for k, v in report["workspacePhases"].items() if v} == kubectl
    [summary] = report["namespaces"]
    by_artifact: dict[str, dict[str, Counter[str]]] = {}
    for pod in summary["workspacePods"]:
        for artifact, found in pod["artifacts"].items():
            counts = by_artifact.setdefault(artifact, {"state": Counter(), "digest": Counter()})
            counts["state"][found["state"]] += 1
            counts["digest"][digest_label(found["digest"])] += 1
    assert by_artifact["agentd"]["state"] == {"current": 2, "stale": 1}
    assert by_artifact["opencode"]["state"] == {"current": 2, "failing": 1}

    # The dashboards: the controller's collectors over the same objects, from two replicas,
    # and the panels' own queries evaluated by promtool.
    pods = (await kube.list(PODS, namespace, labels=SELECTOR))["items"]
    registry = CollectorRegistry()
    registry.register(WorkspaceFleetCollector(Listed(workspaces)))
    registry.register(WorkspacePodsCollector(Listed(pods), Listed(workspaces), report["served"]))
    panels = {
        (q.dashboard, q.panel): q.raw
        for q in queries(rendered_dashboards(render(("minimal.yaml", "full.yaml"))))
    }
    checks = [
        expect(
            concrete(panels[("fleet.json", "Workspaces by phase")], {"namespace": "wspin"}),
            "phase",
            {**dict.fromkeys(report["workspacePhases"], 0), **kubectl},
        )
    ]
    for artifact, counts in by_artifact.items():
        values = {"namespace": "wspin", "artifact": artifact}
        for panel, by in (("Pods by state", "state"), ("Pods by digest", "digest")):
            expr = concrete(panels[("rollout.json", panel)], values)
            checks.append(expect(expr, by, dict(counts[by])))
    test = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series(generate_latest(registry).decode()),
                "promql_expr_test": checks,
            }
        ],
    }
    (tmp_path / "agree.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    result = run_promtool(["test", "rules", "agree.yaml"], tmp_path)
    assert result.returncode == 0, result.output
