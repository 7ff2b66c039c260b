"""Tenant quota: how many workspace pods, and how much CPU and memory, one tenant may hold.

A tenant is what the platform says it is, never what the pod says: the ``llmsafespaces.dev/
tenant`` label of the pod's Namespace, which a tenant cannot write (``wspin.core.tenancy``);
namespaces with the same value share one quota, and a namespace without the label is a tenant
of its own. The pods' own labels decide nothing here, so removing, changing or relabelling
them neither skips nor frees a quota.

A Workspace whose owner a trusted writer vouched for (``wspin.core.owners``) is counted per
owner instead, org else user, wherever it runs: the platform's API keeps every user's
Workspaces in one shared namespace, and a namespace quota there would cap all users together.
The controller labels such a Workspace's pod with digests of the vouched owner
(``llmsafespaces.dev/quota-owner``, ``…/quota-member``); only pods that also carry
``llmsafespaces.dev/workspace-uid`` are read so, and the chart's ownership policies let nobody
but the controller create such a pod or change those labels. Each member (vouched user) may
also have a cap on running workspace pods.

Two pure parts and no I/O:
- ``TenantUsage`` keeps totals per namespace (pods without a vouched owner), per owner and per
  member, updated from pod watch events (``apply``), and which namespaces each tenant holds,
  from Namespace watch events (``observe_namespace``), so an admission adds a few integers
  instead of listing pods: the answer costs the same at 10,000 workspace pods as at ten.
- ``quota_problem`` decides one pod CREATE against ``QuotaLimits`` and the usage.

What counts: workspace pods (``app=llmsafespaces,component=workspace``) not Succeeded or
Failed; a pod's CPU and memory are the requests of its init and main containers summed. The
projected usage (current + this pod) may equal a limit; 0 means unlimited.

The answer comes from the watch's view alone: a review changes nothing any other review is
answered from. The admission port cannot tell the API server's reviews from anyone else's,
so a review-made reservation would let one forged CREATE deny another tenant's real pods. The
price: creates that race the watch (the API server stores a pod and its watch event follows
within a moment) are each judged against the same view, so a burst can pass a limit by the
pods in flight at once; the controller builds a Workspace's pod once per reconcile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from wspin.core.contract import LABEL_WORKSPACE_UID
from wspin.core.objects import Obj
from wspin.core.owners import LABEL_QUOTA_MEMBER, LABEL_QUOTA_OWNER, record_of
from wspin.core.quantity import byte_count, millicores
from wspin.core.tenancy import Tenant, tenant_of
from wspin.core.workspace_pod import is_workspace_pod

TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
MIB: Final = 2**20
MAX_NAMESPACE: Final = 63
"""A namespace name is an RFC 1123 label; a review naming a longer one was not sent by the API
server, and is answered without being kept or quoted whole."""
MAX_LABEL_VALUE: Final = 63

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
    max_active_per_member: int = 0
    """Workspace pods per member (a vouched owner user)."""
    when_unknown: WhenUnknown = "deny"
    """Answer while usage is not yet known (the pod or Namespace cache has not synced): "deny"
    keeps the quota's promise; "allow" keeps workspace creation available instead."""

    @property
    def enabled(self) -> bool:
        return bool(
            self.max_workspaces
            or self.max_cpu_millis
            or self.max_memory_mi
            or self.max_active_per_member
        )


@dataclass(frozen=True)
class Share:
    """One pod's contribution: to its vouched owner's usage, else to its namespace's."""

    namespace: str
    cpu_millis: int
    memory_bytes: int
    owner: str = ""
    """The ``llmsafespaces.dev/quota-owner`` digest of a vouched owner; "" for none."""
    member: str = ""
    """The ``llmsafespaces.dev/quota-member`` digest of a vouched user; "" for none."""

    @property
    def bucket(self) -> str:
        """Where the pod's totals are kept: ``owner:<digest>`` or ``namespace:<name>``."""
        return f"owner:{self.owner}" if self.owner else f"namespace:{self.namespace}"


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
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    owner, member = _owner_labels(meta.get("labels"))
    return Share(namespace, cpu, memory, owner, member)


def _owner_labels(labels: object) -> tuple[str, str]:
    """(owner, member) digests of a controller-built pod; ("", "") for any other pod."""
    if not isinstance(labels, dict) or not labels.get(LABEL_WORKSPACE_UID):
        return "", ""
    found = []
    for key in (LABEL_QUOTA_OWNER, LABEL_QUOTA_MEMBER):
        value = labels.get(key)
        ok = isinstance(value, str) and 0 < len(value) <= MAX_LABEL_VALUE
        found.append(value if ok and isinstance(value, str) else "")
    return found[0], found[1]


class TenantUsage:
    """Totals kept current by pod watch events: per namespace (pods of no vouched owner), per
    owner and per member; a tenant's usage sums its namespaces.

    ``apply`` and ``observe_namespace`` have the informer handler's signature. Memory is one
    small record per counted pod, per bucket with pods and per labelled namespace; every update
    is O(1), and a tenant's usage costs one addition per namespace it holds. Nothing here is
    written by an admission review."""

    def __init__(self) -> None:
        self._shares: dict[tuple[str, str], Share] = {}
        self._totals: dict[str, Totals] = {}
        """Bucket (``Share.bucket``) → totals."""
        self._member_pods: dict[str, int] = {}
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
        previous = self._shares.pop(key, None)
        if previous is not None:
            self._adjust(previous, -1)
        share = None if event == "DELETED" else share_of(pod)
        if share is not None:
            self._shares[key] = share
            self._adjust(share, 1)

    def usage(self, tenant: Tenant) -> Totals:
        """Current totals of every namespace the tenant holds (pods of no vouched owner)."""
        namespaces = self._members.get(tenant.key, set())
        if tenant.key.startswith("namespace:"):
            namespaces = {tenant.key.removeprefix("namespace:")}
        found = Totals()
        for namespace in namespaces:
            totals = self._totals.get(f"namespace:{namespace}")
            if totals is not None:
                found.add(totals, 1)
        return found

    def owner_usage(self, owner: str) -> Totals:
        """Current totals of one vouched owner's pods, in every namespace."""
        return self._totals.get(f"owner:{owner}") or Totals()

    def member_pods(self, member: str) -> int:
        """Workspace pods one vouched user runs."""
        return self._member_pods.get(member, 0)

    def _adjust(self, share: Share, sign: int) -> None:
        """Add (+1) or remove (-1) ``share``; a bucket's record goes with its last pod."""
        bucket = share.bucket
        totals = self._totals.setdefault(bucket, Totals())
        totals.add(share, sign)
        if totals.pods == 0:
            del self._totals[bucket]
        if share.member:
            count = self._member_pods.get(share.member, 0) + sign
            if count:
                self._member_pods[share.member] = count
            else:
                self._member_pods.pop(share.member, None)


class MemberWorkspaces:
    """How many Workspaces each member (a vouched owner user) owns, kept current by Workspace
    watch events (``apply``); read by the validator on CREATE. O(1) per event and per review;
    memory is one small record per Workspace with a vouched user."""

    def __init__(self) -> None:
        self._of: dict[tuple[str, str], str] = {}
        self._counts: dict[str, int] = {}
        self.synced = False

    def apply(self, event: str, ws: Obj, old: Obj | None) -> None:
        """Fold one Workspace watch event (ADDED, MODIFIED, DELETED) in."""
        meta = ws.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        previous = self._of.pop(key, None)
        if previous is not None:
            self._add(previous, -1)
        member = "" if event == "DELETED" else member_of(ws)
        if member:
            self._of[key] = member
            self._add(member, 1)

    def count(self, member: str) -> int:
        return self._counts.get(member, 0)

    def _add(self, member: str, sign: int) -> None:
        count = self._counts.get(member, 0) + sign
        if count:
            self._counts[member] = count
        else:
            self._counts.pop(member, None)


def member_of(ws: Obj) -> str:
    """The member digest of a Workspace whose owner a trusted writer vouched for, else ""."""
    record = record_of(ws)
    if record is None:
        return ""
    return record.quota_labels().get(LABEL_QUOTA_MEMBER, "")


def member_workspaces_problem(
    member: str, cap: int, members: MemberWorkspaces | None
) -> str | None:
    """Why one more Workspace for ``member`` is over ``--max-workspaces-per-member``."""
    if not member or not cap:
        return None
    if members is None or not members.synced:
        return (
            "the Workspaces of this Workspace's owner cannot be counted yet: the webhook's "
            "Workspace cache has not synced; retry shortly"
        )
    owned = members.count(member)
    if owned + 1 <= cap:
        return None
    return (
        f"the owner this Workspace is created for ({member}) already owns {owned} Workspaces; "
        f"the limit is {cap} (--max-workspaces-per-member / "
        "webhook.tenantQuota.maxWorkspacesPerMember)"
    )


def quota_problem(request: Obj, limits: QuotaLimits, usage: TenantUsage) -> str | None:
    """Why the pod CREATE in ``request`` is denied, or None."""
    if request.get("operation") != "CREATE" or not limits.enabled:
        return None
    pod = request.get("object")
    if not isinstance(pod, dict):
        return "request.object must be a Pod"
    share = share_of(pod)
    if share is None:
        return None
    namespace = request.get("namespace") or share.namespace
    if not isinstance(namespace, str) or len(namespace) > MAX_NAMESPACE:
        return "request.namespace is not a namespace name"
    share = Share(namespace, share.cpu_millis, share.memory_bytes, share.owner, share.member)
    if share.owner:
        where = f"the owner this Workspace was created for ({share.owner})"
    else:
        where = usage.tenant_of(namespace).shown
    if not usage.synced:
        if limits.when_unknown == "allow":
            return None
        return (
            f"the quota of {where} cannot be checked yet: the webhook's pod and namespace "
            "caches have not synced; retry shortly (webhook.tenantQuota.whenUnknown=allow "
            "admits instead)"
        )
    if (
        share.member
        and limits.max_active_per_member
        and usage.member_pods(share.member) + 1 > limits.max_active_per_member
    ):
        return (
            f"the member this Workspace was created for ({share.member}) already runs "
            f"{usage.member_pods(share.member)} workspace pods; the limit is "
            f"{limits.max_active_per_member} (--max-active-workspaces-per-member / "
            "webhook.tenantQuota.maxActiveWorkspacesPerMember)"
        )
    now = usage.owner_usage(share.owner) if share.owner else usage.usage(usage.tenant_of(namespace))
    if limits.max_workspaces and now.pods + 1 > limits.max_workspaces:
        return (
            f"{where} already runs {now.pods} workspace pods; the limit is "
            f"{limits.max_workspaces} (--max-workspaces-per-tenant / "
            "webhook.tenantQuota.maxWorkspacesPerTenant)"
        )
    if limits.max_cpu_millis and now.cpu_millis + share.cpu_millis > limits.max_cpu_millis:
        return (
            f"{where} requests {now.cpu_millis}m CPU and this pod {share.cpu_millis}m more; the "
            f"limit is {limits.max_cpu_millis}m (--max-cpu-millis-per-tenant / "
            "webhook.tenantQuota.maxCpuMillisPerTenant)"
        )
    limit_bytes = limits.max_memory_mi * MIB
    if limits.max_memory_mi and now.memory_bytes + share.memory_bytes > limit_bytes:
        return (
            f"{where} requests {_mi(now.memory_bytes)}Mi memory and this pod "
            f"{_mi(share.memory_bytes)}Mi more; the limit is {limits.max_memory_mi}Mi "
            "(--max-memory-mi-per-tenant / webhook.tenantQuota.maxMemoryMiPerTenant)"
        )
    return None


def _mi(count: int) -> int:
    return -((-count) // MIB)
