"""Keeping each Workspace's egress policy in line with its declared domains.

The I/O edge of ``egress.policy``: resolves the declared domains (each answer is
kept until its TTL runs out, so a name is looked up once per TTL however many Workspaces
declare it), builds the desired policy with the pure builder, and writes only a difference:
create when missing, replace when the spec drifted, delete when the Workspace no longer needs
one. A policy at the Workspace's name that another owner controls is reported, never touched.
The reconcile comes back when the earliest answer expires, so an address change is followed
within its TTL without any event.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from controller.egress_settings import EgressSettings
from controller.toolkit.conditions import condition
from controller.types import Obj, ObjectKey, ObjectReader
from controller.workspace.egress.dns import Resolver
from controller.workspace.egress.policy import (
    EgressPlan,
    Resolution,
    declared_domains,
    desired_egress_policy,
    next_resolution,
    policy_name,
)
from controller.workspace.pod import ownership
from wspin.core.clock import Monotonic, monotonic
from wspin.kube.client import Kube

EGRESS_CONDITION: Final = "EgressPolicy"
MAX_CACHED_DOMAINS: Final = 10_000
"""Resolved names kept (least recently used go first): bounded memory at any scale."""


@dataclass(frozen=True)
class EgressResult:
    """The EgressPolicy condition to set, and when to look again (seconds; None: on events)."""

    condition: Obj
    requeue: float | None


class EgressPolicies:
    """Writes the egress policy each Workspace should have; see the module docstring."""

    def __init__(
        self,
        kube: Kube,
        existing: ObjectReader,
        resolver: Resolver,
        settings: EgressSettings,
        *,
        cilium: bool,
        clock: Monotonic = monotonic,
        legacy_before: datetime | None = None,
    ) -> None:
        self.kube = kube
        self.legacy_before = legacy_before
        """Unlabelled policies created before this are an earlier release's (``ownership``)."""
        self.existing = existing
        self.resolver = resolver
        self.settings = settings
        self.cilium = cilium
        self._clock = clock
        self._answers: OrderedDict[str, tuple[Resolution, float]] = OrderedDict()

    async def ensure(self, ws: Obj) -> EgressResult:
        domains = declared_domains(ws.get("spec") or {})
        resolved = {} if self.cilium else await self._resolve([d for d, _ in domains])
        plan = desired_egress_policy(ws, resolved, self.settings, cilium=self.cilium)
        generation = int(ws["metadata"].get("generation") or 0)
        meta = ws["metadata"]
        current = self.existing.get(ObjectKey(meta["namespace"], policy_name(meta["name"])))
        found = ownership.conflict_of(
            current, ws, plan.resource.kind, legacy_before=self.legacy_before
        )
        if found is not None:
            message = (
                f"{plan.resource.kind} {found.name!r} is not this Workspace's ({found.holder}); "
                "the egress policy is not applied"
            )
            return EgressResult(
                condition(EGRESS_CONDITION, "False", "PolicyConflict", message, generation),
                None,
            )
        await self._apply(plan, current)
        return EgressResult(
            self._condition(plan, len(domains), generation),
            None if self.cilium else next_resolution(domains, resolved),
        )

    async def _apply(self, plan: EgressPlan, current: Obj | None) -> None:
        if plan.policy is None:
            if current is not None:
                await self.kube.delete(
                    plan.resource, current["metadata"]["name"], current["metadata"]["namespace"]
                )
            return
        namespace = plan.policy["metadata"]["namespace"]
        if current is None:
            await self.kube.create(plan.resource, plan.policy, namespace)
        elif current.get("spec") != plan.policy["spec"] or ownership.unlabelled(current):
            # An earlier release's policy gets the owner label with its next write.
            body = dict(plan.policy)
            body["metadata"] = {
                **plan.policy["metadata"],
                "resourceVersion": current["metadata"]["resourceVersion"],
            }
            await self.kube.replace(plan.resource, body)

    async def _resolve(self, domains: list[str]) -> dict[str, Resolution]:
        now = self._clock()
        out: dict[str, Resolution] = {}
        for domain in domains:
            if domain.startswith("*."):
                continue
            held = self._answers.get(domain)
            if held is None or held[1] <= now:
                answer = await self.resolver.resolve(domain)
                held = (answer, now + answer.ttl)
                self._answers[domain] = held
            self._answers.move_to_end(domain)
            out[domain] = held[0]
        while len(self._answers) > MAX_CACHED_DOMAINS:
            self._answers.popitem(last=False)
        return out

    def _condition(self, plan: EgressPlan, declared: int, generation: int) -> Obj:
        if plan.policy is None:
            return condition(
                EGRESS_CONDITION,
                "True",
                "OpenEgress",
                "no domains declared; egress is left to the namespace's own policies",
                generation,
            )
        problems = _problems(plan)
        if problems is not None:
            reason, message = problems
            return condition(EGRESS_CONDITION, "False", reason, message, generation)
        # "Applied", never "Enforced": the policy is written, but only the cluster's network
        # plugin enforces it, and whether it does is nothing the API shows (a plugin without
        # NetworkPolicy support accepts the object and ignores it).
        return condition(
            EGRESS_CONDITION,
            "True",
            "Applied",
            f"policy applied: egress limited to DNS, the platform and {declared} declared "
            "domain(s) where the network plugin enforces it",
            generation,
        )


MAX_LISTED: Final = 10
"""Entries of each kind a condition message names; the rest are counted."""


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:MAX_LISTED])
    return shown + (f" and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else "")


def _problems(plan: EgressPlan) -> tuple[str, str] | None:
    """(reason, message) naming what the policy leaves out, or None when it leaves out nothing.

    The reason is the gravest kind present: a dropped address (a domain pointing into the
    cluster or at the metadata endpoint), a refused port, then a name that did not resolve."""
    parts: list[str] = []
    reason = ""
    if plan.dropped:
        reason = "AddressesDropped"
        parts.append(
            "addresses dropped, as they are in the cluster's, private, loopback, link-local or "
            "carrier-grade ranges and not in --workspace-egress-allowed-cidrs: "
            + _listed([d.describe() for d in plan.dropped])
        )
    if plan.refused_ports:
        reason = reason or "PortsRefused"
        parts.append(
            "ports refused, not in --workspace-egress-ports: " + _listed(list(plan.refused_ports))
        )
    if plan.unresolved:
        reason = reason or "DomainsUnresolved"
        parts.append(
            f"these declared domains are not reachable: {_listed(list(plan.unresolved))} (a "
            "'*.' pattern needs Cilium's toFQDNs; other names did not resolve and are retried)"
        )
    return (reason, "; ".join(parts)) if parts else None
