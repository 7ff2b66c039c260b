"""Tenant quota: how many workspace pods, and how much CPU and memory, one tenant may hold in a
namespace.

Two pure parts and no I/O:
- ``TenantUsage`` keeps per-(namespace, tenant) totals, updated from pod watch events
  (``apply``), so an admission reads three integers instead of listing pods: the answer costs
  the same at 10,000 workspace pods as at ten.
- ``quota_problem`` decides one pod CREATE against ``QuotaLimits`` and the usage.

What counts: pods with ``component=workspace`` and a tenant label, in the same namespace, not
Succeeded or Failed; a pod's CPU and memory are the requests of its init and main containers
summed. The projected usage (current + this pod) may equal a limit; 0 means unlimited. A pod
allowed here is reserved until the watch shows it (or ``RESERVATION_SECONDS`` pass), so a burst
of creates faster than the watch cannot slip past the limit on one replica.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from wspin.core.clock import Monotonic
from wspin.core.contract import LABEL_COMPONENT, LABEL_COMPONENT_VALUE
from wspin.core.quantity import byte_count, millicores

Obj = dict[str, Any]

LABEL_TENANT: Final = "llmsafespaces.dev/tenant"
UNSPECIFIED_TENANT: Final = "unspecified"
TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
# Long enough for any watch event to arrive after the API server stores the pod; short enough
# that a create the API server later refused (another webhook, a conflict) frees its share soon.
RESERVATION_SECONDS: Final = 30.0
MIB: Final = 2**20

WhenUnknown = Literal["allow", "deny"]


@dataclass(frozen=True)
class QuotaLimits:
    """Per-tenant, per-namespace limits; 0 disables a limit."""

    max_workspaces: int = 0
    """Workspace pods per tenant in one namespace."""
    max_cpu_millis: int = 0
    """Summed CPU requests per tenant in one namespace, in millicores."""
    max_memory_mi: int = 0
    """Summed memory requests per tenant in one namespace, in MiB."""
    when_unknown: WhenUnknown = "deny"
    """Answer while usage is not yet known (the pod cache has not synced): "deny" keeps the
    quota's promise; "allow" keeps workspace creation available instead."""

    @property
    def enabled(self) -> bool:
        return bool(self.max_workspaces or self.max_cpu_millis or self.max_memory_mi)


@dataclass(frozen=True)
class Share:
    """One pod's contribution to its tenant's usage."""

    namespace: str
    tenant: str
    cpu_millis: int
    memory_bytes: int


@dataclass
class Totals:
    pods: int = 0
    cpu_millis: int = 0
    memory_bytes: int = 0

    def add(self, share: Share, sign: int) -> None:
        self.pods += sign
        self.cpu_millis += sign * share.cpu_millis
        self.memory_bytes += sign * share.memory_bytes


def tenant_of(pod: Obj) -> str | None:
    """The pod's tenant label when it is a quota-counted workspace pod, else None."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if not isinstance(labels, dict) or labels.get(LABEL_COMPONENT) != LABEL_COMPONENT_VALUE:
        return None
    tenant = labels.get(LABEL_TENANT)
    if not isinstance(tenant, str) or tenant in ("", UNSPECIFIED_TENANT):
        return None
    return tenant


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
    """What the pod counts against its tenant, or None when it does not count."""
    tenant = tenant_of(pod)
    if tenant is None:
        return None
    if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return None
    cpu, memory = pod_requests(pod)
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    return Share(namespace, tenant, cpu, memory)


class TenantUsage:
    """Per-(namespace, tenant) totals kept current by pod watch events.

    ``apply`` has the informer handler's signature. Memory is one small record per counted pod
    and one per tenant; every update is O(1)."""

    def __init__(self, clock: Monotonic) -> None:
        self._clock = clock
        self._shares: dict[tuple[str, str], Share] = {}
        self._totals: dict[tuple[str, str], Totals] = {}
        self._reserved: dict[tuple[str, str], tuple[Share, float]] = {}
        self.synced = False

    def apply(self, event: str, pod: Obj, old: Obj | None) -> None:
        """Fold one watch event (ADDED, MODIFIED, DELETED) into the totals."""
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

    def usage(self, namespace: str, tenant: str) -> Totals:
        """Current totals for the tenant, reservations included."""
        self._expire()
        totals = self._totals.get((namespace, tenant))
        return Totals(totals.pods, totals.cpu_millis, totals.memory_bytes) if totals else Totals()

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
        """Add (+1) or remove (-1) ``share``; a tenant's record goes with its last pod."""
        key = (share.namespace, share.tenant)
        totals = self._totals.setdefault(key, Totals())
        totals.add(share, sign)
        if totals.pods == 0:
            del self._totals[key]


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
    share = Share(namespace, share.tenant, share.cpu_millis, share.memory_bytes)
    if not usage.synced:
        if limits.when_unknown == "allow":
            return None, None
        return (
            f"tenant {share.tenant!r} quota cannot be checked yet: the webhook's pod cache has "
            "not synced; retry shortly (webhook.tenantQuota.whenUnknown=allow admits instead)"
        ), None
    now = usage.usage(namespace, share.tenant)
    where = f"tenant {share.tenant!r} in namespace {namespace!r}"
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
