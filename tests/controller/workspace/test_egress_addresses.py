"""Which resolved addresses a declared domain may open: tables over IPv4 and IPv6 answer sets.

A tenant controls what its domain resolves to, so each row is an answer a hostile zone can
give: the policy must never carry an allow rule into the cluster, the node, the metadata
endpoint or private space, unless the operator named the range."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from controller.egress_settings import EgressSettings
from controller.workspace.egress.addresses import denied_networks, drop_reason, filter_addresses
from controller.workspace.egress.policy import Resolution, desired_egress_policy

DENY = EgressSettings(default="deny", platform_namespaces=("llmsafespaces",))

DROPPED = [
    # IPv4
    ("127.0.0.1", "loopback"),
    ("127.8.9.1", "loopback"),
    ("0.0.0.0", "this network"),  # noqa: S104 (an answer, not a bind)
    ("10.96.0.1", "private"),  # the API server's Service on most clusters
    ("10.244.3.7", "private"),  # a pod
    ("172.16.0.10", "private"),
    ("192.168.1.20", "private"),  # a node's kubelet
    ("169.254.169.254", "metadata"),
    ("169.254.170.2", "link-local"),  # the ECS task metadata endpoint
    ("100.64.0.1", "carrier-grade NAT"),
    ("100.100.100.200", "carrier-grade NAT"),  # Alibaba's metadata endpoint
    ("192.0.0.8", "IETF"),
    ("192.0.2.1", "documentation"),
    ("198.18.0.1", "benchmarking"),
    ("224.0.0.251", "multicast"),
    ("255.255.255.255", "reserved"),
    ("168.63.129.16", "Azure"),
    # IPv6 and the IPv4-in-IPv6 forms
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fe80::1", "link-local"),
    ("fd00:ec2::254", "unique local"),  # AWS's IPv6 metadata endpoint
    ("fc00::1", "unique local"),
    ("fec0::1", "site-local"),
    ("ff02::1", "multicast"),
    ("::ffff:10.96.0.1", "IPv4-mapped"),
    ("::ffff:8.8.8.8", "IPv4-mapped"),
    ("::a00:1", "IPv4-compatible"),
    ("64:ff9b::a9fe:a9fe", "reaches 169.254.169.254"),  # NAT64 of the metadata endpoint
    ("64:ff9b::7f00:1", "reaches 127.0.0.1"),
    ("64:ff9b:1::a00:1", "local-use NAT64"),
    ("2002:a60:1::1", "reaches 10.96.0.1"),  # 6to4 of the Service
    ("2001:0:4136:e378::1", "Teredo"),
    ("2001:db8::1", "documentation"),
    ("100::1", "discard-only"),
    ("4000::1", "outside IPv6 global unicast"),
    ("not-an-address", "not an IP address"),
]
KEPT = [
    "151.101.0.223",
    "140.82.112.3",
    "8.8.8.8",
    "2606:4700:4700::1111",
    "2a00:1450:4001:80b::200e",
    "64:ff9b::808:808",  # NAT64 of a public address
    "2002:808:808::1",  # 6to4 of a public address
]


@pytest.mark.parametrize(("address", "words"), DROPPED)
def test_a_special_purpose_address_is_dropped_with_its_range_named(
    address: str, words: str
) -> None:
    reason = drop_reason(address, DENY)
    assert reason is not None and words in reason


@pytest.mark.parametrize("address", KEPT)
def test_a_public_unicast_address_is_kept(address: str) -> None:
    assert drop_reason(address, DENY) is None


def test_the_operators_allowed_cidrs_keep_an_address_in_any_range() -> None:
    settings = EgressSettings(
        allowed_cidrs=(
            ipaddress.ip_network("10.20.0.0/16"),
            ipaddress.ip_network("fd00:10::/64"),
        )
    )
    assert drop_reason("10.20.3.4", settings) is None
    assert drop_reason("fd00:10::5", settings) is None
    assert drop_reason("64:ff9b::a14:304", settings) is None  # NAT64 of 10.20.3.4
    assert drop_reason("10.21.0.1", settings) is not None


def test_the_clusters_own_ranges_are_dropped_even_when_public() -> None:
    settings = EgressSettings(cluster_cidrs=(ipaddress.ip_network("34.118.224.0/20"),))
    reason = drop_reason("34.118.224.1", settings)
    assert reason is not None and "34.118.224.0/20" in reason
    assert drop_reason("34.118.240.1", settings) is None


def answer(*addresses: str) -> dict[str, Resolution]:
    return {"evil.example.com": Resolution(addresses, 60)}


def workspace(*entries: Any) -> dict[str, Any]:
    egress = [e if isinstance(e, dict) else {"domain": e} for e in entries]
    return {
        "apiVersion": "llmsafespaces.dev/v1",
        "kind": "Workspace",
        "metadata": {"name": "ws1", "namespace": "team-a", "uid": "u-1"},
        "spec": {"runtime": "python", "networkAccess": {"egress": egress}},
    }


def allowed_cidrs(policy: dict[str, Any] | None) -> list[str]:
    assert policy is not None
    return [
        b["ipBlock"]["cidr"]
        for rule in policy["spec"]["egress"]
        for b in rule.get("to", [])
        if "ipBlock" in b
    ]


@pytest.mark.parametrize(
    "addresses",
    [
        ("10.96.0.1",),
        ("169.254.169.254", "fd00:ec2::254"),
        ("127.0.0.1", "::1"),
        ("::ffff:10.96.0.1", "64:ff9b::a60:1"),
        ("100.64.0.1", "192.168.0.10", "fe80::1"),
    ],
)
def test_a_domain_resolving_into_the_cluster_opens_nothing_and_is_reported(
    addresses: tuple[str, ...],
) -> None:
    plan = desired_egress_policy(
        workspace("evil.example.com"), answer(*addresses), DENY, cilium=False
    )
    assert allowed_cidrs(plan.policy) == []
    assert {d.address for d in plan.dropped} == set(addresses)
    assert all(d.domain == "evil.example.com" for d in plan.dropped)


def test_a_mixed_answer_keeps_only_its_public_addresses() -> None:
    plan = desired_egress_policy(
        workspace("evil.example.com"),
        answer("151.101.0.223", "10.96.0.1", "2606:4700::1", "169.254.169.254"),
        DENY,
        cilium=False,
    )
    assert allowed_cidrs(plan.policy) == ["151.101.0.223/32", "2606:4700::1/128"]
    assert [d.address for d in plan.dropped] == ["10.96.0.1", "169.254.169.254"]


def test_ports_outside_the_operators_list_are_refused() -> None:
    ws = workspace(
        {
            "domain": "evil.example.com",
            "ports": [
                {"port": 443, "protocol": "TCP"},
                {"port": 6443, "protocol": "TCP"},
                {"port": 10250, "protocol": "TCP"},
            ],
        }
    )
    plan = desired_egress_policy(ws, answer("151.101.0.223"), DENY, cilium=False)
    assert plan.policy is not None
    assert plan.policy["spec"]["egress"][-1]["ports"] == [{"port": 443, "protocol": "TCP"}]
    assert plan.refused_ports == ("evil.example.com:6443/TCP", "evil.example.com:10250/TCP")


def test_a_domain_with_only_refused_ports_gets_no_rule() -> None:
    ws = workspace({"domain": "evil.example.com", "ports": [{"port": 22, "protocol": "TCP"}]})
    plan = desired_egress_policy(ws, answer("151.101.0.223"), DENY, cilium=False)
    assert allowed_cidrs(plan.policy) == []
    assert plan.refused_ports == ("evil.example.com:22/TCP",)
    cilium = desired_egress_policy(ws, {}, DENY, cilium=True)
    assert cilium.policy is not None
    assert not any("toFQDNs" in rule for rule in cilium.policy["spec"]["egress"])


def test_with_cilium_the_dropped_ranges_are_denied_on_the_opened_ports() -> None:
    settings = EgressSettings(
        default="deny",
        allowed_cidrs=(ipaddress.ip_network("10.20.0.0/16"),),
        allowed_ports=(443, 80),
    )
    plan = desired_egress_policy(workspace("evil.example.com"), {}, settings, cilium=True)
    assert plan.policy is not None
    (deny,) = plan.policy["spec"]["egressDeny"]
    by_cidr = {entry["cidr"]: entry.get("except", []) for entry in deny["toCIDRSet"]}
    for cidr in ("169.254.0.0/16", "127.0.0.0/8", "fc00::/7"):
        assert cidr in by_cidr
    assert by_cidr["10.0.0.0/8"] == ["10.20.0.0/16"]
    assert "64:ff9b::a9fe:0/112" in by_cidr  # NAT64 of link-local
    assert deny["toPorts"] == [
        {"ports": [{"port": "443", "protocol": "ANY"}, {"port": "80", "protocol": "ANY"}]}
    ]


def test_a_range_the_operator_allows_whole_is_not_denied() -> None:
    settings = EgressSettings(allowed_cidrs=(ipaddress.ip_network("10.0.0.0/8"),))
    assert ipaddress.ip_network("10.0.0.0/8") not in [n for n, _ in denied_networks(settings)]


def test_every_address_is_kept_or_dropped_once_in_answer_order() -> None:
    kept, dropped = filter_addresses("d.example.com", ["8.8.8.8", "10.0.0.1", "1.1.1.1"], DENY)
    assert kept == ["8.8.8.8", "1.1.1.1"]
    assert [d.address for d in dropped] == ["10.0.0.1"]
    assert dropped[0].describe() == "d.example.com -> 10.0.0.1, private (10.0.0.0/8)"
