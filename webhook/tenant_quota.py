"""Tenant quota: how many workspace pods, and how much CPU and memory, one tenant may hold.

A tenant is what the platform says it is, never what the pod says: the ``llmsafespaces.dev/
tenant`` label of the pod's Namespace, which a tenant cannot write (``wspin.core.tenancy``);
namespaces with the same value share one quota, and a namespace without the label is a tenant
of its own. The pods' own labels decide nothing here, so removing, changing or relabelling
them neither skips nor frees a quota.

Two pure parts and no I/O:
- ``TenantUsage`` keeps per-namespace totals, updated from pod watch events (``apply``), and
  which namespaces each tenant holds, from Namespace watch events (``observe_namespace``), so
  an admission adds a few integers instead of listing pods: the answer costs the same at
  10,000 workspace pods as at ten.
- ``quota_problem`` decides one pod CREATE against ``QuotaLimits`` and the usage.

What counts: workspace pods (``app=llmsafespaces,component=workspace``) not Succeeded or
Failed; a pod's CPU and memory are the requests of its init and main containers summed. The
projected usage (current + this pod) may equal a limit; 0 means unlimited. A pod allowed here
is reserved until the watch shows it (or ``RESERVATION_SECONDS`` pass), so a burst of creates
faster than the watch cannot slip past the limit on one replica.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from wspin.core.clock import Monotonic
from wspin.core.quantity import byte_count, millicores
from wspin.core.tenancy import Tenant, tenant_of
from wspin.core.workspace_pod import is_workspace_pod

Obj = dict[str, Any]

TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
# Long enough for any watch event to arrive after the API server stores the pod; short enough
# that a create the API server later refused (another webhook, a conflict) frees its share soon.
RESERVATION_SECONDS: Final = 30.0
MIB: Final = 2**20

WhenUnknown = Literal["allow", "deny"]


@dataclass(frozen=True)
class QuotaLimits:
    """Per-tenant limits; 0 disables a limit."""

    max_workspaces: int = 0
    """Workspace pods per tenant."""
    max_cpu_millis: int = 0
    """Summed CPU requests per tenant, in millicores."""
    max_memory_mi: int = 0
    """Summed memory requests per tenant, in MiB."""
    when_unknown: WhenUnknown = "deny"
    """Answer while usage is not yet known (the pod or Namespace cache has not synced): "deny"
    keeps the quota's promise; "allow" keeps workspace creation available instead."""

    @property
    def enabled(self) -> bool:
        return bool(self.max_workspaces or self.max_cpu_millis or self.max_memory_mi)


@dataclass(frozen=True)
class Share:
    """One pod's contribution to its namespace's usage."""

    namespace: str
    cpu_millis: int
    memory_bytes: int


@dataclass
class Totals:
    pods: int = 0
    cpu_millis: int = 0
    memory_bytes: int = 0

    def add(self, share: Share | Totals, sign: int) -> None:
        self.pods += sign if isinstance(share, Share) else sign * share.pods
        self.cpu_millis += sign * share.cpu_millis
        self.memory_bytes += sign * share.memory_bytes


def pod_requests(pod: Obj) -> tuple[int, int]:
    """(CPU millicores, memory bytes) requested by the pod's init and main containers.

    A request the API server would not have stored (not a quantity) counts as zero here: the
    API server rejects the pod itself, so such a pod never runs."""
    spec = pod.get("spec") or {}
    cpu = memory = 0
    for kind in ("initContainers", "containers"):
        containers = spec.get(kind) if isinstance(spec, dict) else None
        if not isinstance(containers, list):
            continue
        for container in containers:
            if not isinstance(container, dict):
                continue
            requests = (container.get("resources") or {}).get("requests") or {}
            if not isinstance(requests, dict):
                continue
            try:
                cpu += millicores(requests["cpu"]) if "cpu" in requests else 0
                memory += byte_count(requests["memory"]) if "memory" in requests else 0
            except ValueError:
                continue
    return cpu, memory


def share_of(pod: Obj) -> Share | None:
    """What the pod counts against its namespace's tenant, or None when it does not count."""
    if not is_workspace_pod(pod):
        return None
    if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return None
    cpu, memory = pod_requests(pod)
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    return Share(namespace, cpu, memory)


class TenantUsage:
    """Per-namespace totals kept current by pod watch events, summed per tenant.

    ``apply`` and ``observe_namespace`` have the informer handler's signature. Memory is one
    small record per counted pod, per namespace with pods and per labelled namespace; every
    update is O(1), and a tenant's usage costs one addition per namespace it holds."""

    def __init__(self, clock: Monotonic) -> None:
        self._clock = clock
        self._shares: dict[tuple[str, str], Share] = {}
        self._totals: dict[str, Totals] = {}
        self._reserved: dict[tuple[str, str], tuple[Share, float]] = {}
        self._tenants: dict[str, Tenant] = {}
        """Labelled namespaces → their tenant (an unlabelled one is a tenant of its own)."""
        self._members: dict[str, set[str]] = {}
        """Tenant key → the labelled namespaces that carry it."""
        self.synced = False

    def tenant_of(self, namespace: str) -> Tenant:
        """The tenant whose quota ``namespace``'s workspace pods use."""
        return self._tenants.get(namespace) or tenant_of(namespace, {})

    def observe_namespace(self, event: str, namespace: Obj, old: Obj | None) -> None:
        """Fold one Namespace watch event in: which tenant the namespace now belongs to."""
        meta = namespace.get("metadata") or {}
        name = str(meta.get("name") or "")
        previous = self._tenants.pop(name, None)
        if previous is not None:
            members = self._members[previous.key]
            members.discard(name)
            if not members:
                del self._members[previous.key]
        if event == "DELETED":
            return
        tenant = tenant_of(name, meta.get("labels") or {})
        if tenant.key != tenant_of(name, {}).key:
            self._tenants[name] = tenant
            self._members.setdefault(tenant.key, set()).add(name)

    def apply(self, event: str, pod: Obj, old: Obj | None) -> None:
        """Fold one pod watch event (ADDED, MODIFIED, DELETED) into the totals."""
        metadata = pod.get("metadata") or {}
        key = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
        self._unreserve(key)
        previous = self._shares.pop(key, None)
        if previous is not None:
            self._adjust(previous, -1)
        share = None if event == "DELETED" else share_of(pod)
        if share is not None:
            self._shares[key] = share
            self._adjust(share, 1)

    def usage(self, tenant: Tenant) -> Totals:
        """Current totals of every namespace the tenant holds, reservations included."""
        self._expire()
        namespaces = self._members.get(tenant.key, set())
        if tenant.key.startswith("namespace:"):
            namespaces = {tenant.key.removeprefix("namespace:")}
        found = Totals()
        for namespace in namespaces:
            totals = self._totals.get(namespace)
            if totals is not None:
                found.add(totals, 1)
        return found

    def reserve(self, name: str, share: Share) -> None:
        """Count an admitted pod until its watch event arrives."""
        key = (share.namespace, name)
        if not name or key in self._shares or key in self._reserved:
            return
        self._reserved[key] = (share, self._clock() + RESERVATION_SECONDS)
        self._adjust(share, 1)

    def _unreserve(self, key: tuple[str, str]) -> None:
        held = self._reserved.pop(key, None)
        if held is not None:
            self._adjust(held[0], -1)

    def _expire(self) -> None:
        if not self._reserved:
            return
        now = self._clock()
        for key in [k for k, (_, until) in self._reserved.items() if until <= now]:
            self._unreserve(key)

    def _adjust(self, share: Share, sign: int) -> None:
        """Add (+1) or remove (-1) ``share``; a namespace's record goes with its last pod."""
        totals = self._totals.setdefault(share.namespace, Totals())
        totals.add(share, sign)
        if totals.pods == 0:
            del self._totals[share.namespace]


def quota_problem(
    request: Obj, limits: QuotaLimits, usage: TenantUsage
) -> tuple[str | None, Share | None]:
    """(why the pod CREATE in ``request`` is denied or None, the share to reserve if allowed)."""
    if request.get("operation") != "CREATE" or not limits.enabled:
        return None, None
    pod = request.get("object")
    if not isinstance(pod, dict):
        return "request.object must be a Pod", None
    share = share_of(pod)
    if share is None:
        return None, None
    namespace = str(request.get("namespace") or share.namespace)
    share = Share(namespace, share.cpu_millis, share.memory_bytes)
    tenant = usage.tenant_of(namespace)
    if not usage.synced:
        if limits.when_unknown == "allow":
            return None, None
        return (
            f"the quota of {tenant.shown} cannot be checked yet: the webhook's pod and "
            "namespace caches have not synced; retry shortly "
            "(webhook.tenantQuota.whenUnknown=allow admits instead)"
        ), None
    now = usage.usage(tenant)
    where = tenant.shown
    if limits.max_workspaces and now.pods + 1 > limits.max_workspaces:
        return (
            f"{where} already runs {now.pods} workspace pods; the limit is "
            f"{limits.max_workspaces} (--max-workspaces-per-tenant / "
            "webhook.tenantQuota.maxWorkspacesPerTenant)"
        ), None
    if limits.max_cpu_millis and now.cpu_millis + share.cpu_millis > limits.max_cpu_millis:
        return (
            f"{where} requests {now.cpu_millis}m CPU and this pod {share.cpu_millis}m more; the "
            f"limit is {limits.max_cpu_millis}m (--max-cpu-millis-per-tenant / "
            "webhook.tenantQuota.maxCpuMillisPerTenant)"
        ), None
    limit_bytes = limits.max_memory_mi * MIB
    if limits.max_memory_mi and now.memory_bytes + share.memory_bytes > limit_bytes:
        return (
            f"{where} requests {_mi(now.memory_bytes)}Mi memory and this pod "
            f"{_mi(share.memory_bytes)}Mi more; the limit is {limits.max_memory_mi}Mi "
            "(--max-memory-mi-per-tenant / webhook.tenantQuota.maxMemoryMiPerTenant)"
        ), None
    return None, share


def _mi(count: int) -> int:
    return -((-count) // MIB)
