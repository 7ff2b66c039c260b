"""``wspin status``: which workspace pods run which release, per namespace, and the Workspaces
by phase.

The release the webhook serves now is read from its Deployment (the ``--agentd-image`` and
``--opencode-image`` digests it injects); each workspace pod is classified by
``wspin.core.rollout`` from its receipt annotation, its image volumes and its Workspace's
verification conditions. Workspaces are counted by phase with ``wspin.core.fleet``, the
counting behind the controller's ``llmsafespaces_workspaces`` gauge. Reads only: one Deployment,
and a list of workspace pods and of Workspaces (cluster-wide, or in the namespaces asked for).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from wspin.core import fleet, rollout
from wspin.core.contract import (
    ARTIFACTS,
    LABEL_APP,
    LABEL_APP_VALUE,
    LABEL_COMPONENT,
    LABEL_COMPONENT_VALUE,
)
from wspin.core.errors import WspinError
from wspin.core.kinds import DEPLOYMENTS, PODS, WORKSPACES
from wspin.core.objects import Obj
from wspin.kube.client import Kube
from wspinctl.install import Installation, ProcessArgs

WORKSPACE_PODS = f"{LABEL_APP}={LABEL_APP_VALUE},{LABEL_COMPONENT}={LABEL_COMPONENT_VALUE}"
COLUMNS: tuple[rollout.State, ...] = ("current", "stale", "not_injected", "failing")


@dataclass(frozen=True)
class Status:
    """The served release, every workspace pod's, and the Workspaces per phase."""

    served: dict[str, str]
    pods: list[rollout.PodRelease]
    phases: dict[str, int]

    def by_namespace(self) -> dict[str, list[rollout.PodRelease]]:
        grouped: dict[str, list[rollout.PodRelease]] = {}
        for pod in self.pods:
            grouped.setdefault(pod.namespace, []).append(pod)
        return grouped

    def as_dict(self) -> Obj:
        namespaces = []
        for namespace, pods in self.by_namespace().items():
            summary: dict[str, int] = dict.fromkeys(rollout.STATES, 0)
            for pod in pods:
                summary[rollout.pod_state(pod)] += 1
            namespaces.append(
                {
                    "namespace": namespace,
                    "pods": len(pods),
                    **summary,
                    "workspacePods": [
                        {
                            "name": pod.name,
                            "workspace": pod.workspace,
                            "state": rollout.pod_state(pod),
                            "artifacts": {
                                item.artifact: {"digest": item.digest, "state": item.state}
                                for item in pod.artifacts
                            },
                        }
                        for pod in pods
                    ],
                }
            )
        return {"served": self.served, "workspacePhases": self.phases, "namespaces": namespaces}


async def read_status(kube: Kube, install: Installation, namespaces: Iterable[str] = ()) -> Status:
    """The served release and the workspace pods of ``namespaces`` (all when empty)."""
    webhook = await kube.get_or_none(DEPLOYMENTS, install.webhook, install.namespace)
    if webhook is None:
        raise WspinError(
            f"no webhook Deployment {install.webhook} in namespace {install.namespace}",
            "pass --namespace and --release naming the installation (helm list -A shows them)",
        )
    args = ProcessArgs.of(webhook)
    served: dict[str, str] = {
        str(artifact.name): digest
        for artifact in ARTIFACTS
        if (digest := rollout.digest_of(args.value(f"--{artifact.name}-image") or ""))
    }
    pods: list[Obj] = []
    workspaces: list[Obj] = []
    scopes: list[str | None] = [*namespaces] or [None]
    for namespace in scopes:
        pods += (await kube.list(PODS, namespace, labels=WORKSPACE_PODS)).get("items") or []
        workspaces += (await kube.list(WORKSPACES, namespace)).get("items") or []
    for workspace in workspaces:  # list items of a namespaced kind always name their namespace
        workspace.setdefault("metadata", {}).setdefault("namespace", "")
    return Status(
        served, rollout.pod_releases(pods, workspaces, served), fleet.phase_counts(workspaces)
    )


def _short(digest: str) -> str:
    return digest[:19] if digest else "-"


def render(install: Installation, status: Status) -> str:
    """A table per namespace, then every pod that is not current with what it runs."""
    served = " ".join(f"{name} {_short(d)}" for name, d in status.served.items()) or "unknown"
    lines = [f"wspin status: release {install.release}; the webhook serves {served}"]
    counted = [f"{n} {phase}" for phase, n in status.phases.items() if n]
    lines += [f"workspaces: {', '.join(counted) or 'none'}", ""]
    if not status.pods:
        lines.append("no workspace pods")
        return "\n".join(lines)
    header = ("NAMESPACE", "PODS", "CURRENT", "STALE", "NOT INJECTED", "FAILING")
    rows: list[tuple[str, ...]] = [header]
    for namespace, pods in status.by_namespace().items():
        states = [rollout.pod_state(pod) for pod in pods]
        rows.append((namespace, str(len(pods)), *(str(states.count(s)) for s in COLUMNS)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines += [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    notes = {
        "stale": "older release; recreated with the current one on the next restartGeneration",
        "not_injected": "no delivery receipt backed by the pod's image volumes",
        "failing": "a binary failed verification (exit 81-84; see the Workspace's conditions)",
        "injected": "injected; the webhook's release is unknown",
    }
    for state, note in notes.items():
        pods = [pod for pod in status.pods if rollout.pod_state(pod) == state]
        if not pods:
            continue
        lines += ["", f"{state.replace('_', ' ')} ({note}):"]
        for pod in pods:
            runs = " ".join(f"{item.artifact} {_short(item.digest)}" for item in pod.artifacts)
            lines.append(f"  {pod.namespace}/{pod.name}  workspace {pod.workspace}  {runs}")
    return "\n".join(lines)
