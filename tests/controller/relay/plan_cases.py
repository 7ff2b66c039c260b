"""The planner's golden cases: each ``testdata/plan/<case>.yaml`` holds what a pass observed
(spec, status, the VMs listed under the CR's UID, the router's health, the time);
``plan_case`` plans one, and ``render`` shows a plan as its ``<case>.yaml.planned`` golden
holds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from controller.relay.actions import Destroy, FleetPlan, Launch, Observation, Replacing
from controller.relay.drivers.base import CloudInstance
from controller.relay.health import HealthReport, RelayHealth
from controller.relay.plan import plan_fleet
from controller.relay.spec import parse_spec
from wspin.core.clock import parse_time

TESTDATA = Path(__file__).parent / "testdata" / "plan"
CASES = sorted(p.name.removesuffix(".yaml") for p in TESTDATA.glob("*.yaml"))


def _vm(raw: dict[str, Any]) -> CloudInstance:
    return CloudInstance(
        instance_id=raw["id"],
        region=raw.get("region", "us-east-1"),
        state=raw.get("state", "running"),
        public_ip=raw.get("publicIP", ""),
        tags=raw.get("tags") or {},
        launched_at=parse_time(raw.get("launchedAt")),
    )


def health_report(raw: dict[str, Any] | None) -> HealthReport | None:
    """The router's health report a case describes, or ``None`` when it describes none."""
    if raw is None:
        return None
    relays = {
        relay_id: RelayHealth(
            healthy=bool(fields.get("healthy")),
            requests_total=int(fields.get("requests", 0)),
            count_429=int(fields.get("count429", 0)),
            egress_bytes=int(fields.get("egress", 0)),
        )
        for relay_id, fields in (raw.get("relays") or {}).items()
    }
    return HealthReport(relays=relays, fallback_active=bool(raw.get("fallback")))


def plan_case(case: str) -> FleetPlan:
    """The plan for what the case's pass observed."""
    raw: dict[str, Any] = yaml.safe_load((TESTDATA / f"{case}.yaml").read_text())
    seen = raw.get("observed") or {}
    observation = Observation(
        vms=[_vm(vm) for vm in seen.get("vms") or []],
        unlisted=set(seen.get("unlisted") or []),
        described={
            key: (_vm({"id": key, **value}) if value else None)
            for key, value in (seen.get("described") or {}).items()
        },
        unknown=set(seen.get("unknown") or []),
        destroyed=set(seen.get("destroyed") or []),
        drivers=set(seen.get("drivers", ["aws", "oci"])),
    )
    now = parse_time(raw["now"])
    assert now is not None
    return plan_fleet(
        parse_spec({"spec": raw["spec"]}),
        raw.get("status") or {},
        observation,
        health_report(raw.get("health")),
        uid=raw.get("uid", "uid-1"),
        now=now,
        generation=raw.get("generation"),
        rotate=raw.get("rotate", ""),
    )


def _action(action: Launch | Destroy) -> dict[str, Any]:
    if isinstance(action, Launch):
        launch: dict[str, Any] = {
            "launch": action.slot.provider,
            "region": action.slot.region,
            "attempts": action.attempts,
            "launchFailures": action.launch_failures,
        }
        if action.replaces:
            launch["replaces"] = action.replaces
        if action.token_key:
            launch["tokenKey"] = action.token_key
        return launch
    shown: dict[str, Any] = {
        "destroy": action.instance_id,
        "provider": action.provider,
        "region": action.region,
        "reason": action.reason,
    }
    if action.keep is not None:
        shown["keepOnFailure"] = action.keep["id"]
    if action.blocks:
        shown["blocksLaunchOf"] = action.blocks
    if action.promotes:
        shown["handsSlotTo"] = action.promotes
    if action.token_key and action.token_key != action.provider:
        shown["tokenKey"] = action.token_key
    return shown


def _replacing(step: Replacing) -> dict[str, Any]:
    shown: dict[str, Any] = {"provider": step.provider, "old": step.old}
    if step.new:
        shown["new"] = step.new
    else:
        shown["unhealthySeconds"] = step.unhealthy_seconds
        shown["inPlace"] = step.in_place
    return shown


def render(plan: FleetPlan) -> str:
    """The plan as its golden holds it: YAML, keys sorted."""
    shown = {
        "actions": [_action(a) for a in plan.actions],
        "instances": plan.instances,
        "dropTokens": sorted(plan.drop_tokens),
        "rotated": plan.rotated,
        "waits": plan.waits,
        "provisioned": [list(p) for p in plan.provisioned],
        "adopted": plan.adopted,
        "replaced": plan.replaced,
        "started": [_replacing(r) for r in plan.started],
        "completed": [_replacing(r) for r in plan.completed],
        "held": plan.held,
    }
    return yaml.safe_dump(shown, sort_keys=True)
