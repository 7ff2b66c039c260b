"""Egress policies through the Workspace reconciler, against the API server (runs unchanged
on a real cluster): written before the pod, following a domain's address change within its
TTL, rewritten only on change, and never taking over a policy someone else owns."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from controller.egress_settings import EgressSettings
from controller.workspace.egress.policy import NETWORK_POLICIES, Resolution
from controller.workspace.egress.sync import EGRESS_CONDITION, EgressPolicies
from controller.workspace.wiring import POLICY_SELECTOR
from tests.controller.workspace.conftest import Harness
from tests.support.clock import FakeClock
from wspin.core.objects import ObjectKey
from wspin.kube.informer import Informer


@dataclass
class FakeResolver:
    """Answers from ``records``; counts lookups."""

    records: dict[str, Resolution] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)

    async def resolve(self, domain: str) -> Resolution:
        self.lookups.append(domain)
        return self.records.get(domain, Resolution((), 30.0))


@dataclass
class Egress:
    resolver: FakeResolver
    clock: FakeClock
    policies: Informer


@pytest.fixture
async def egress(harness: Harness) -> AsyncIterator[Egress]:
    policies = Informer(
        harness.kube, NETWORK_POLICIES, namespace=harness.namespace, labels=POLICY_SELECTOR
    )
    task = asyncio.create_task(policies.run())
    await asyncio.wait_for(policies.wait_synced(), 10)
    resolver, clock = FakeResolver(), FakeClock()
    settings = EgressSettings(mode="networkpolicy", platform_namespaces=("llmsafespaces",))
    harness.use(
        egress=EgressPolicies(
            harness.kube, policies, resolver, settings, cilium=False, clock=clock.monotonic
        )
    )
    try:
        yield Egress(resolver, clock, policies)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def cidrs(policy: dict[str, object]) -> list[str]:
    rules = policy["spec"]["egress"]  # type: ignore[index]
    return [
        peer["ipBlock"]["cidr"]
        for rule in rules
        for peer in rule.get("to", [])
        if "ipBlock" in peer
    ]


async def policy_of(harness: Harness, egress: Egress) -> dict[str, object] | None:
    found = await harness.kube.get_or_none(NETWORK_POLICIES, "ws1-egress", harness.namespace)
    await harness.synced(egress.policies, "ws1-egress", found)
    return found


def egress_condition(ws: dict[str, object]) -> dict[str, str]:
    (found,) = [c for c in ws["status"]["conditions"] if c["type"] == EGRESS_CONDITION]  # type: ignore[index]
    return found  # type: ignore[no-any-return]


async def test_the_policy_follows_a_domain_to_its_new_address_within_its_ttl(
    harness: Harness, egress: Egress
) -> None:
    egress.resolver.records["pypi.org"] = Resolution(("151.101.0.10",), 60.0)
    await harness.apply(networkAccess={"egress": [{"domain": "pypi.org"}]})
    requeue = await harness.reconcile()
    policy = await policy_of(harness, egress)
    assert policy is not None and cidrs(policy) == ["151.101.0.10/32"]
    assert requeue is not None and requeue.after == pytest.approx(60.0)
    applied = egress_condition(await harness.workspace())
    assert (applied["status"], applied["reason"]) == ("True", "Applied")  # not "Enforced":
    assert "where the network plugin enforces it" in applied["message"]  # wspin cannot see that

    egress.resolver.records["pypi.org"] = Resolution(("151.101.0.20",), 60.0)
    await harness.reconcile()  # within the TTL: the held answer, no lookup, no write
    assert egress.resolver.lookups == ["pypi.org"]
    unchanged = await policy_of(harness, egress)
    assert unchanged is not None
    assert unchanged["metadata"]["resourceVersion"] == policy["metadata"]["resourceVersion"]  # type: ignore[index]

    egress.clock.advance(60)
    await harness.reconcile()
    moved = await policy_of(harness, egress)
    assert moved is not None and cidrs(moved) == ["151.101.0.20/32"]


async def test_a_workspace_without_domains_gets_dns_and_the_platform_only(
    harness: Harness, egress: Egress
) -> None:
    await harness.apply()
    await harness.reconcile()
    policy = await policy_of(harness, egress)
    assert policy is not None and cidrs(policy) == []
    assert len(policy["spec"]["egress"]) == 2  # type: ignore[index]


async def test_an_unresolvable_domain_is_reported_and_stays_closed(
    harness: Harness, egress: Egress
) -> None:
    await harness.apply(networkAccess={"egress": [{"domain": "nx.example.com"}]})
    await harness.reconcile()
    found = egress_condition(await harness.workspace())
    assert found["status"] == "False" and found["reason"] == "DomainsUnresolved"
    assert "nx.example.com" in found["message"]
    policy = await policy_of(harness, egress)
    assert policy is not None and cidrs(policy) == []


async def test_a_foreign_policy_at_the_name_is_reported_and_left_alone(
    harness: Harness, egress: Egress
) -> None:
    foreign = {
        "metadata": {
            "name": "ws1-egress",
            "namespace": harness.namespace,
            "labels": {"app": "llmsafespaces", "llmsafespaces.dev/workspace": "ws1"},
        },
        "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{}]},
    }
    created = await harness.kube.create(NETWORK_POLICIES, foreign, harness.namespace)
    await harness.synced(egress.policies, "ws1-egress", created)
    await harness.apply(networkAccess={"egress": [{"domain": "pypi.org"}]})
    await harness.reconcile()
    found = egress_condition(await harness.workspace())
    assert found["reason"] == "PolicyConflict"
    after = egress.policies.get(ObjectKey(harness.namespace, "ws1-egress"))
    assert after is not None and after["spec"]["egress"] == [{}]


async def test_a_domain_pointing_into_the_cluster_is_dropped_and_named_on_the_workspace(
    harness: Harness, egress: Egress
) -> None:
    """``127.0.0.1.nip.io``-style names: any zone the tenant controls can answer with the API
    server's Service or the metadata endpoint."""
    egress.resolver.records["127.0.0.1.nip.io"] = Resolution(("127.0.0.1",), 60.0)
    egress.resolver.records["meta.evil.example"] = Resolution(
        ("169.254.169.254", "10.96.0.1", "151.101.0.10"), 60.0
    )
    await harness.apply(
        networkAccess={
            "egress": [
                {"domain": "127.0.0.1.nip.io"},
                {"domain": "meta.evil.example", "ports": [{"port": 10250, "protocol": "TCP"}]},
            ]
        }
    )
    await harness.reconcile()
    policy = await policy_of(harness, egress)
    assert policy is not None and cidrs(policy) == []
    found = egress_condition(await harness.workspace())
    assert found["status"] == "False" and found["reason"] == "AddressesDropped"
    assert "127.0.0.1.nip.io -> 127.0.0.1, loopback (127.0.0.0/8)" in found["message"]
    assert "meta.evil.example:10250/TCP" in found["message"]
