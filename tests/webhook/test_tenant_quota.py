"""Tenant quota: the usage totals fed by pod and Namespace events, and the admission decision.

The tenant is the platform's word (the Namespace's label), never the pod's: each attack on the
pod's own labels is a case below."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.admission import review_tenant_quota
from webhook.tenant_quota import (
    QuotaLimits,
    TenantUsage,
    pod_requests,
    quota_problem,
)
from wspin.core.contract import LABEL_WORKSPACE_UID
from wspin.core.owners import OwnerRecord
from wspin.core.tenancy import LABEL_TENANT, tenant_of


def pod(
    name: str,
    tenant: str | None = "acme",
    *,
    namespace: str = "ws-a",
    cpu: str | None = "500m",
    memory: str | None = "512Mi",
    phase: str | None = None,
    component: str = "workspace",
    init_cpu: str | None = None,
) -> dict[str, Any]:
    labels = {"app": "llmsafespaces", "component": component}
    if tenant is not None:
        labels[LABEL_TENANT] = tenant
    requests: dict[str, str] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    spec: dict[str, Any] = {
        "containers": [{"name": "workspace", "resources": {"requests": requests}}]
    }
    if init_cpu is not None:
        spec["initContainers"] = [
            {"name": "platform-init", "resources": {"requests": {"cpu": init_cpu}}}
        ]
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }
    if phase is not None:
        body["status"] = {"phase": phase}
    return body


def create(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "operation": "CREATE",
        "namespace": obj["metadata"]["namespace"],
        "name": obj["metadata"]["name"],
        "object": obj,
    }


def namespace(name: str, tenant: str | None = None) -> dict[str, Any]:
    labels = {LABEL_TENANT: tenant} if tenant is not None else {}
    return {"metadata": {"name": name, "labels": labels}}


def synced(
    *pods: dict[str, Any],
    namespaces: dict[str, str | None] | None = None,
) -> TenantUsage:
    """Usage from ``pods``; ``namespaces`` maps each namespace to its tenant label (default:
    ws-a and ws-b both of tenant acme)."""
    usage = TenantUsage()
    for name, tenant in (namespaces or {"ws-a": "acme", "ws-b": "acme"}).items():
        usage.observe_namespace("ADDED", namespace(name, tenant), None)
    for p in pods:
        usage.apply("ADDED", p, None)
    usage.synced = True
    return usage


ACME = tenant_of("ws-a", {LABEL_TENANT: "acme"})


class TestRequests:
    def test_init_and_main_container_requests_are_summed(self) -> None:
        assert pod_requests(pod("p", cpu="1", init_cpu="250m")) == (1250, 512 * 2**20)


class TestAllowedUnchecked:
    LIMITS = QuotaLimits(max_workspaces=1)

    @pytest.mark.parametrize("tenant", [None, "", "unspecified", "someone-else"])
    def test_the_pods_own_tenant_label_neither_skips_nor_moves_the_quota(
        self, tenant: str | None
    ) -> None:
        usage = synced(pod("old", "acme"))
        problem = quota_problem(create(pod("p", tenant)), self.LIMITS, usage)
        assert problem is not None and "tenant 'acme' already runs 1" in problem

    def test_relabelling_a_running_pod_frees_nothing(self) -> None:
        first = pod("p1", "acme")
        usage = synced(first)
        usage.apply("MODIFIED", pod("p1", None), first)
        assert usage.usage(ACME).pods == 1

    def test_non_create_operations_pass(self) -> None:
        usage = synced(pod("old"))
        request = {**create(pod("p")), "operation": "UPDATE"}
        assert quota_problem(request, self.LIMITS, usage) is None

    def test_all_limits_zero_means_unlimited(self) -> None:
        usage = synced(*[pod(f"p{i}") for i in range(50)])
        assert quota_problem(create(pod("new")), QuotaLimits(), usage) is None

    def test_non_workspace_pods_pass_and_do_not_count(self) -> None:
        usage = synced(pod("relay", component="relay"))
        assert usage.usage(ACME).pods == 0
        problem = quota_problem(create(pod("p", component="relay")), self.LIMITS, usage)
        assert problem is None


class TestLimits:
    def test_the_limit_itself_is_allowed_and_one_more_is_denied_naming_limit_and_usage(
        self,
    ) -> None:
        limits = QuotaLimits(max_workspaces=2)
        usage = synced(pod("p1"))
        assert quota_problem(create(pod("p2")), limits, usage) is None
        usage.apply("ADDED", pod("p2"), None)
        problem = quota_problem(create(pod("p3")), limits, usage)
        assert problem is not None
        assert "already runs 2 workspace pods; the limit is 2" in problem
        assert "--max-workspaces-per-tenant" in problem
        assert "webhook.tenantQuota.maxWorkspacesPerTenant" in problem

    def test_cpu_over_the_limit_is_denied(self) -> None:
        usage = synced(pod("p1", cpu="1500m"))
        limits = QuotaLimits(max_cpu_millis=2000)
        assert quota_problem(create(pod("ok", cpu="500m")), limits, usage) is None
        problem = quota_problem(create(pod("big", cpu="501m")), limits, usage)
        assert problem is not None and "1500m CPU and this pod 501m more" in problem
        assert "the limit is 2000m" in problem

    def test_memory_over_the_limit_is_denied(self) -> None:
        usage = synced(pod("p1", memory="1Gi"))
        limits = QuotaLimits(max_memory_mi=1536)
        assert quota_problem(create(pod("ok", memory="512Mi")), limits, usage) is None
        problem = quota_problem(create(pod("big", memory="513Mi")), limits, usage)
        assert problem is not None and "the limit is 1536Mi" in problem

    def test_other_tenants_namespaces_and_terminal_pods_do_not_count(self) -> None:
        usage = synced(
            pod("other", namespace="ws-c"),
            pod("unlabelled", namespace="ws-d"),
            pod("done", phase="Succeeded"),
            pod("crashed", phase="Failed"),
            namespaces={"ws-a": "acme", "ws-c": "globex", "ws-d": None},
        )
        assert quota_problem(create(pod("p")), QuotaLimits(max_workspaces=1), usage) is None

    def test_namespaces_with_one_tenant_label_share_one_quota(self) -> None:
        usage = synced(pod("p1", namespace="ws-a"))
        problem = quota_problem(
            create(pod("p2", namespace="ws-b")), QuotaLimits(max_workspaces=1), usage
        )
        assert problem is not None and "tenant 'acme' already runs 1" in problem

    def test_an_unlabelled_namespace_is_a_tenant_of_its_own(self) -> None:
        usage = synced(pod("p1", namespace="ws-x"), namespaces={"ws-x": None, "ws-y": None})
        limits = QuotaLimits(max_workspaces=1)
        problem = quota_problem(create(pod("p2", namespace="ws-x")), limits, usage)
        assert problem is not None and "namespace 'ws-x' already runs 1" in problem
        assert quota_problem(create(pod("p3", namespace="ws-y")), limits, usage) is None

    def test_a_namespace_the_platform_relabels_moves_its_pods_to_the_new_tenant(self) -> None:
        usage = synced(pod("p1", namespace="ws-b"))
        usage.observe_namespace("MODIFIED", namespace("ws-b", "globex"), None)
        assert usage.usage(ACME).pods == 0
        globex = tenant_of("ws-b", {LABEL_TENANT: "globex"})
        assert usage.usage(globex).pods == 1
        usage.observe_namespace("DELETED", namespace("ws-b", "globex"), None)
        assert usage.usage(globex).pods == 0

    def test_deletion_and_termination_free_the_share(self) -> None:
        first = pod("p1")
        usage = synced(first)
        limits = QuotaLimits(max_workspaces=1)
        assert quota_problem(create(pod("p2")), limits, usage) is not None
        usage.apply("MODIFIED", pod("p1", phase="Succeeded"), first)
        assert quota_problem(create(pod("p2")), limits, usage) is None
        usage.apply("DELETED", pod("p1", phase="Succeeded"), None)
        assert usage.usage(ACME).pods == 0

    def test_a_changed_request_replaces_the_old_share(self) -> None:
        first = pod("p1", cpu="1")
        usage = synced(first)
        usage.apply("MODIFIED", pod("p1", cpu="2"), first)
        assert usage.usage(ACME).cpu_millis == 2000


def vouched(name: str, user: str, org: str = "", namespace: str = "shared") -> dict[str, Any]:
    """A pod the controller built for a Workspace whose owner a trusted writer vouched for."""
    body = pod(name, None, namespace=namespace)
    body["metadata"]["labels"].update(
        {LABEL_WORKSPACE_UID: f"uid-{name}", **OwnerRecord(user, org, vouched=True).quota_labels()}
    )
    return body


class TestVouchedOwners:
    """In the platform API's shared namespace every user's pods sit side by side: a vouched
    owner is counted on its own, org else user, and each member has its own cap."""

    def test_owners_in_one_shared_namespace_are_counted_apart(self) -> None:
        usage = synced(vouched("a1", "alice", "org-1"), vouched("a2", "alice", "org-1"))
        limits = QuotaLimits(max_workspaces=2)
        assert quota_problem(create(vouched("b1", "bob", "org-2")), limits, usage) is None
        problem = quota_problem(create(vouched("a3", "carol", "org-1")), limits, usage)
        assert problem and "already runs 2 workspace pods" in problem

    def test_a_user_without_an_org_is_its_own_owner(self) -> None:
        usage = synced(vouched("a1", "alice"))
        limits = QuotaLimits(max_workspaces=1)
        assert quota_problem(create(vouched("a2", "alice")), limits, usage)
        assert quota_problem(create(vouched("b1", "bob")), limits, usage) is None

    def test_each_member_of_an_org_has_its_own_active_cap(self) -> None:
        usage = synced(vouched("a1", "alice", "org-1"))
        limits = QuotaLimits(max_active_per_member=1)
        problem = quota_problem(create(vouched("a2", "alice", "org-1")), limits, usage)
        assert problem and "--max-active-workspaces-per-member" in problem
        assert quota_problem(create(vouched("b1", "bob", "org-1")), limits, usage) is None

    def test_owner_labels_on_a_pod_the_controller_did_not_build_count_for_its_namespace(
        self,
    ) -> None:
        forged = vouched("p1", "victim", "victim-org", namespace="ws-a")
        del forged["metadata"]["labels"][LABEL_WORKSPACE_UID]
        usage = synced(forged)
        assert usage.usage(ACME).pods == 1
        victims = QuotaLimits(max_workspaces=1)
        assert quota_problem(create(vouched("v1", "victim", "victim-org")), victims, usage) is None


class TestForgedReviews:
    """Anyone who reaches the admission port can send a review; none may change what another
    review is answered."""

    def test_a_forged_create_for_team_b_does_not_deny_team_bs_real_pods(self) -> None:
        usage = synced(pod("b0", namespace="ws-b"), namespaces={"ws-b": "team-b"})
        limits = QuotaLimits(max_workspaces=2)
        forged = {**create(pod("forged", namespace="ws-b")), "uid": "f-1"}
        assert review_tenant_quota(forged, limits, usage).outcome == "allowed"
        real = {**create(pod("b1", namespace="ws-b")), "uid": "r-1"}
        assert review_tenant_quota(real, limits, usage).outcome == "allowed"

    def test_reviews_with_a_huge_namespace_keep_nothing_and_quote_nothing_whole(self) -> None:
        usage = synced()
        limits = QuotaLimits(max_workspaces=1)
        before = (dict(usage._totals), dict(usage._shares), dict(usage._tenants))
        huge = "n" * (2_900_000)
        for i in range(40):
            request = {**create(pod(f"p{i}", namespace=huge)), "uid": f"u{i}"}
            decision = review_tenant_quota(request, limits, usage)
            assert decision.outcome == "denied"
            assert len(decision.message) < 1000
        after = (dict(usage._totals), dict(usage._shares), dict(usage._tenants))
        assert after == before

    def test_a_burst_is_judged_against_the_watchs_view_until_the_watch_shows_it(self) -> None:
        usage = synced()
        limits = QuotaLimits(max_workspaces=1)
        assert quota_problem(create(pod("p1")), limits, usage) is None
        assert quota_problem(create(pod("p2")), limits, usage) is None
        usage.apply("ADDED", pod("p1"), None)
        assert quota_problem(create(pod("p2")), limits, usage)


class TestUnknownUsage:
    def test_before_the_cache_syncs_the_configured_answer_is_given(self) -> None:
        usage = TenantUsage()
        problem = quota_problem(create(pod("p")), QuotaLimits(max_workspaces=5), usage)
        assert problem is not None and "whenUnknown=allow" in problem
        open_limits = QuotaLimits(max_workspaces=5, when_unknown="allow")
        assert quota_problem(create(pod("p")), open_limits, usage) is None
