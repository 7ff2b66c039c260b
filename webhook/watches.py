"""The webhook's watch-fed views: the runtime catalogue and the Namespaces' labels the
Workspace validator reads, and the tenant usage the quota reads.

Both are informers (list-then-watch, re-list on 410), so an admission reads memory, never the
API: the answer stays fast and available however many Workspaces and pods there are. Workspace
pods are cut down to the few fields the quota counts before they are cached (``quota_view``),
so 10,000 of them take a few MiB in a process whose memory limit is 256 MiB.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from webhook.tenant_quota import MemberWorkspaces, QuotaLimits, TenantUsage
from wspin.core.contract import LABEL_APP, LABEL_COMPONENT, LABEL_WORKSPACE_UID
from wspin.core.kinds import NAMESPACES, PODS, WORKSPACES, Resource
from wspin.core.objects import Obj
from wspin.core.owners import ANNOTATION_VERIFIED_OWNER, LABEL_QUOTA_MEMBER, LABEL_QUOTA_OWNER
from wspin.core.runtimes import RUNTIME_ENVIRONMENTS, RuntimeCatalogue
from wspin.core.tenancy import NamespaceLabels, namespace_view
from wspin.core.workspace_pod import SELECTOR
from wspin.kube.client import Kube
from wspin.kube.informer import Informer

QUOTA_PODS_SELECTOR: Final = SELECTOR
"""Only pods the quota counts (workspace pods) are listed and watched."""
QUOTA_LABELS: Final = (
    LABEL_APP,
    LABEL_COMPONENT,
    LABEL_WORKSPACE_UID,
    LABEL_QUOTA_OWNER,
    LABEL_QUOTA_MEMBER,
)
"""The pod labels the quota reads: what a workspace pod is, and a vouched owner's digests."""


def quota_view(pod: Obj) -> Obj:
    """The fields of a pod the tenant quota reads, and the keys the informer needs."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    spec = pod.get("spec") or {}

    def requests(containers: object) -> list[Obj]:
        if not isinstance(containers, list):
            return []
        return [
            {"resources": {"requests": (c.get("resources") or {}).get("requests") or {}}}
            for c in containers
            if isinstance(c, dict)
        ]

    return {
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "resourceVersion": meta.get("resourceVersion"),
            "labels": {k: labels[k] for k in QUOTA_LABELS if k in labels},
        },
        "spec": {
            "initContainers": requests(spec.get("initContainers")),
            "containers": requests(spec.get("containers")),
        },
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }


def owner_view(ws: Obj) -> Obj:
    """The fields of a Workspace the per-member count reads: its keys and owner record."""
    meta = ws.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    record = annotations.get(ANNOTATION_VERIFIED_OWNER)
    return {
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "resourceVersion": meta.get("resourceVersion"),
            "annotations": {ANNOTATION_VERIFIED_OWNER: record} if isinstance(record, str) else {},
        }
    }


@dataclass
class WatchedViews:
    """The informers the webhook runs, and the readiness checks that wait for them."""

    catalogue: RuntimeCatalogue
    namespaces: NamespaceLabels
    usage: TenantUsage | None
    informers: list[Informer] = field(default_factory=list)
    members: MemberWorkspaces | None = None
    """Workspaces per vouched owner user, when ``--max-workspaces-per-member`` is set."""

    def checks(self) -> list[tuple[str, Callable[[], str | None]]]:
        """(name, check) pairs for ``/readyz``: unready until every cache has synced."""
        out: list[tuple[str, Callable[[], str | None]]] = []
        for informer in self.informers:
            out.append((f"cache {informer.name}", _synced_check(informer)))
        return out

    async def run(self) -> None:
        """Run every informer until cancelled; the quota counts once its cache has synced."""
        tasks = [asyncio.create_task(i.run(), name=f"informer {i.name}") for i in self.informers]
        try:
            if self.usage is not None or self.members is not None:
                # The quota needs both the pods and which tenant each namespace belongs to.
                await asyncio.gather(*(i.wait_synced() for i in self.informers))
                if self.usage is not None:
                    self.usage.synced = True
                if self.members is not None:
                    self.members.synced = True
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def _synced_check(informer: Informer) -> Callable[[], str | None]:
    return lambda: None if informer.has_synced else f"{informer.name} has not synced yet"


def watched_resources(quota: QuotaLimits, max_per_member: int = 0) -> tuple[Resource, ...]:
    """What ``watched_views`` lists and watches cluster-wide."""
    found: tuple[Resource, ...] = (RUNTIME_ENVIRONMENTS, NAMESPACES)
    if quota.enabled:
        found += (PODS,)
    if max_per_member:
        found += (WORKSPACES,)
    return found


def watched_views(kube: Kube, quota: QuotaLimits, max_per_member: int = 0) -> WatchedViews:
    """The catalogue and the Namespaces always; the pod cache only when a tenant quota is
    configured, the Workspaces' owner records only with ``--max-workspaces-per-member``."""
    runtimes = Informer(kube, RUNTIME_ENVIRONMENTS)
    namespaces = Informer(kube, NAMESPACES, transform=namespace_view)
    informers = [runtimes, namespaces]
    usage = None
    if quota.enabled:
        usage = TenantUsage()
        namespaces.add_handler(usage.observe_namespace)
        pods = Informer(kube, PODS, labels=QUOTA_PODS_SELECTOR, transform=quota_view)
        pods.add_handler(usage.apply)
        informers.append(pods)
    members = None
    if max_per_member:
        members = MemberWorkspaces()
        workspaces = Informer(kube, WORKSPACES, transform=owner_view)
        workspaces.add_handler(members.apply)
        informers.append(workspaces)
    return WatchedViews(
        RuntimeCatalogue(runtimes), NamespaceLabels(namespaces), usage, informers, members
    )
