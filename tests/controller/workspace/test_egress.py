"""The per-Workspace egress policy builder (pure)."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from controller.egress_settings import EgressSettings, egress_settings_from
from controller.workspace.egress.policy import (
    CILIUM_NETWORK_POLICIES,
    MAX_DOMAINS,
    NETWORK_POLICIES,
    Resolution,
    declared_domains,
    desired_egress_policy,
    next_resolution,
)
from tests.support.netpol import Destination, egress_allowed
from wspin.core.errors import ConfigError


def workspace(*domains: Any) -> dict[str, Any]:
    egress = [d if isinstance(d, dict) else {"domain": d} for d in domains]
    return {
        "apiVersion": "llmsafespaces.dev/v1",
        "kind": "Workspace",
        "metadata": {"name": "ws1", "namespace": "team-a", "uid": "u-1"},
        "spec": {"runtime": "python", "networkAccess": {"egress": egress}},
    }


RESOLVED = {
    "pypi.org": Resolution(("151.101.0.223", "151.101.64.223"), 60),
    "github.com": Resolution(("140.82.112.3", "2606:50c0:8000::154"), 20),
}
DENY = EgressSettings(default="deny", platform_namespaces=("llmsafespaces",))


class TestNetworkPolicy:
    def test_declared_domains_become_address_rules_beside_dns_and_the_platform(self) -> None:
        plan = desired_egress_policy(
            workspace("pypi.org", "github.com"), RESOLVED, DENY, cilium=False
        )
        assert plan.resource is NETWORK_POLICIES and plan.unresolved == ()
        policy = plan.policy
        assert policy is not None
        assert policy["metadata"]["name"] == "ws1-egress"
        assert policy["metadata"]["ownerReferences"][0]["uid"] == "u-1"
        spec = policy["spec"]
        assert spec["policyTypes"] == ["Egress"]
        assert spec["podSelector"]["matchLabels"]["llmsafespaces.dev/workspace"] == "ws1"
        dns, platform, pypi, github = spec["egress"]
        assert {p["port"] for p in dns["ports"]} == {53}
        assert platform["to"][0]["namespaceSelector"]["matchExpressions"][0]["values"] == [
            "llmsafespaces"
        ]
        assert [b["ipBlock"]["cidr"] for b in pypi["to"]] == [
            "151.101.0.223/32",
            "151.101.64.223/32",
        ]
        assert pypi["ports"] == [{"port": 443, "protocol": "TCP"}]
        assert "2606:50c0:8000::154/128" in [b["ipBlock"]["cidr"] for b in github["to"]]

    def test_the_policy_is_a_valid_kubernetes_1_32_object(self) -> None:
        plan = desired_egress_policy(workspace("pypi.org"), RESOLVED, DENY, cilium=False)
        assert plan.policy is not None
        kubernetes_validate.validate(plan.policy, "1.32", strict=True)

    def test_declared_ports_replace_the_https_default(self) -> None:
        ws = workspace({"domain": "pypi.org", "ports": [{"port": 80, "protocol": "TCP"}]})
        plan = desired_egress_policy(ws, RESOLVED, DENY, cilium=False)
        assert plan.policy is not None
        assert plan.policy["spec"]["egress"][-1]["ports"] == [{"port": 80, "protocol": "TCP"}]

    def test_wildcards_and_unresolved_names_are_reported_never_opened(self) -> None:
        plan = desired_egress_policy(
            workspace("*.example.com", "nx.example.org", "pypi.org"), RESOLVED, DENY, cilium=False
        )
        assert plan.unresolved == ("*.example.com", "nx.example.org")
        assert plan.policy is not None
        cidrs = [
            b["ipBlock"]["cidr"]
            for r in plan.policy["spec"]["egress"]
            for b in r.get("to", [])
            if "ipBlock" in b
        ]
        assert cidrs == ["151.101.0.223/32", "151.101.64.223/32"]

    def test_no_domains_with_default_deny_keeps_only_dns_and_the_platform(self) -> None:
        plan = desired_egress_policy(workspace(), {}, DENY, cilium=False)
        assert plan.policy is not None and len(plan.policy["spec"]["egress"]) == 2

    def test_no_domains_with_default_allow_owns_no_policy(self) -> None:
        plan = desired_egress_policy(workspace(), {}, EgressSettings(default="allow"), cilium=False)
        assert plan.policy is None

    def test_domains_still_get_a_policy_under_default_allow(self) -> None:
        plan = desired_egress_policy(
            workspace("pypi.org"), RESOLVED, EgressSettings(default="allow"), cilium=False
        )
        assert plan.policy is not None

    def test_the_same_inputs_give_the_same_policy_so_unchanged_means_no_write(self) -> None:
        shuffled = {"pypi.org": Resolution(("151.101.64.223", "151.101.0.223"), 60)}
        one = desired_egress_policy(workspace("pypi.org"), RESOLVED, DENY, cilium=False)
        two = desired_egress_policy(workspace("pypi.org"), shuffled, DENY, cilium=False)
        assert one.policy == two.policy


class TestCilium:
    def test_domains_become_to_fqdns_with_the_dns_proxy_rule(self) -> None:
        plan = desired_egress_policy(
            workspace("pypi.org", "*.githubusercontent.com"), {}, DENY, cilium=True
        )
        assert plan.resource is CILIUM_NETWORK_POLICIES and plan.unresolved == ()
        policy = plan.policy
        assert policy is not None and policy["apiVersion"] == "cilium.io/v2"
        dns_rule, _platform, fqdn_rule = policy["spec"]["egress"]
        assert dns_rule["toPorts"][0]["rules"]["dns"] == [{"matchPattern": "*"}]
        assert fqdn_rule["toFQDNs"] == [
            {"matchName": "pypi.org"},
            {"matchPattern": "*.githubusercontent.com"},
        ]
        assert fqdn_rule["toPorts"] == [{"ports": [{"port": "443", "protocol": "TCP"}]}]


class TestBounds:
    def test_at_most_max_domains_are_read(self) -> None:
        ws = workspace(*[f"d{i}.example.com" for i in range(MAX_DOMAINS + 10)])
        assert len(declared_domains(ws["spec"])) == MAX_DOMAINS

    @pytest.mark.parametrize("egress", [None, "x", [None, 3, {"domain": 5}]])
    def test_malformed_entries_are_skipped(self, egress: Any) -> None:
        assert declared_domains({"networkAccess": {"egress": egress}}) == []

    def test_the_next_resolution_is_the_earliest_ttl_clamped(self) -> None:
        domains = declared_domains(workspace("pypi.org", "github.com")["spec"])
        assert next_resolution(domains, RESOLVED) == 20
        assert next_resolution(domains, {"pypi.org": Resolution(("1.1.1.1",), 0)}) == 5.0
        assert next_resolution(domains, {"pypi.org": Resolution(("1.1.1.1",), 86400)}) == 300.0
        assert next_resolution([], RESOLVED) is None


KUBE_SYSTEM = {"kubernetes.io/metadata.name": "kube-system"}
KUBE_DNS = Destination("10.96.0.10", "kube-system", KUBE_SYSTEM, {"k8s-app": "kube-dns"})


def rendered(*domains: Any, settings: EgressSettings = DENY) -> dict[str, Any]:
    plan = desired_egress_policy(workspace(*domains), RESOLVED, settings, cilium=False)
    assert plan.policy is not None
    return plan.policy


class TestDnsGoesOnlyToTheClustersDns:
    """Rule: in networkpolicy mode port 53 is open to the cluster's DNS pods (and a node-local
    cache the operator names) only, as in the Cilium variant; a DNS rule without ``to`` opened
    port 53 on every address, a way out of a default-deny workspace."""

    @pytest.mark.parametrize("protocol", ["UDP", "TCP"])
    @pytest.mark.parametrize("domains", [(), ("pypi.org",)])
    def test_dns_to_a_foreign_address_is_not_allowed(
        self, protocol: str, domains: tuple[str, ...]
    ) -> None:
        policy = rendered(*domains)
        assert egress_allowed(policy, KUBE_DNS, 53, protocol)
        for foreign in ("203.0.113.53", "8.8.8.8", "151.101.0.223", "2001:db8::53"):
            assert not egress_allowed(policy, Destination(foreign), 53, protocol), foreign

    def test_dns_to_other_pods_is_not_allowed(self) -> None:
        policy = rendered()
        own = {"kubernetes.io/metadata.name": "team-a"}
        for pod in (
            Destination("10.1.0.7", "kube-system", KUBE_SYSTEM, {"k8s-app": "metrics-server"}),
            Destination("10.1.0.8", "team-a", own, {"k8s-app": "kube-dns"}),  # the tenant's own
        ):
            assert not egress_allowed(policy, pod, 53, "UDP"), pod

    def test_the_operator_names_the_dns_pods_and_a_node_local_cache(self) -> None:
        settings = egress_settings_from(
            mode="networkpolicy",
            default="deny",
            namespaces="",
            allowed_cidrs="",
            cluster_cidrs="",
            ports="443",
            dns_namespace="dns-system",
            dns_pod_labels="app.kubernetes.io/name=coredns,tier=dns",
            dns_addresses="169.254.20.10/32",
        )
        policy = rendered(settings=settings)
        coredns = Destination(
            "10.2.0.5",
            "dns-system",
            {"kubernetes.io/metadata.name": "dns-system"},
            {"app.kubernetes.io/name": "coredns", "tier": "dns"},
        )
        assert egress_allowed(policy, coredns, 53, "UDP")
        assert egress_allowed(policy, Destination("169.254.20.10"), 53, "UDP")
        assert not egress_allowed(policy, Destination("169.254.169.254"), 53, "UDP")
        assert not egress_allowed(policy, KUBE_DNS, 53, "UDP")  # no longer the DNS named
        assert not egress_allowed(policy, Destination("169.254.20.10"), 80, "TCP")

    def test_the_cilium_variant_names_the_same_pods(self) -> None:
        plan = desired_egress_policy(workspace("pypi.org"), {}, DENY, cilium=True)
        assert plan.policy is not None
        dns = plan.policy["spec"]["egress"][0]
        assert dns["toEndpoints"] == [
            {
                "matchLabels": {
                    "k8s:io.kubernetes.pod.namespace": "kube-system",
                    "k8s:k8s-app": "kube-dns",
                }
            }
        ]

    @pytest.mark.parametrize(
        ("flag", "value"),
        [
            ("dns_namespace", "Kube_System"),
            ("dns_pod_labels", "k8s-app"),
            ("dns_pod_labels", ""),
            ("dns_pod_labels", "bad key=x"),
            ("dns_addresses", "node-local"),
        ],
    )
    def test_a_bad_dns_setting_names_its_flag(self, flag: str, value: str) -> None:
        with pytest.raises(ConfigError) as refused:
            egress_settings_from(
                mode="networkpolicy",
                default="deny",
                namespaces="",
                allowed_cidrs="",
                cluster_cidrs="",
                ports="443",
                **{flag: value},
            )
        assert "--workspace-egress-dns-" in str(refused.value)
