"""``plan_fleet`` against golden files, one case per fleet situation.

Each ``testdata/plan/<case>.yaml`` holds what a pass observed (spec, status, the VMs listed
under the CR's UID, the router's health, the time); ``<case>.yaml.planned`` is the plan:
the actions, the status entries they lead to, and the bookkeeping beside them. Cases are
found by listing the folder; a golden without an input fails as stale.
``WSPIN_REFRESH_GOLDEN=1`` rewrites the goldens (``make refresh-goldens``). Every case is
planned twice and must give the same plan (the planner is pure).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.relay.actions import Destroy, FleetPlan, Launch, Observation, Replacing
from controller.relay.drivers.base import CloudInstance
from controller.relay.health import HealthReport, RelayHealth
from controller.relay.plan import plan_fleet
from controller.relay.spec import parse_spec
from wspin.core.clock import parse_time

TESTDATA = Path(__file__).parent / "testdata" / "plan"
REFRESH = os.environ.get("WSPIN_REFRESH_GOLDEN") == "1"
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


def _health(raw: dict[str, Any] | None) -> HealthReport | None:
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
        _health(raw.get("health")),
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


def test_there_are_cases() -> None:
    assert len(CASES) >= 12


def test_every_golden_has_an_input() -> None:
    stale = [
        p.name for p in TESTDATA.glob("*.yaml.planned") if p.name.removesuffix(".planned") not in
        {f"{c}.yaml" for c in CASES}
    ]  # fmt: skip
    assert stale == []


@pytest.mark.parametrize("case", CASES)
def test_plan_matches_the_golden(case: str) -> None:
    actual = render(plan_case(case))
    assert render(plan_case(case)) == actual, "the planner must be pure"
    golden = TESTDATA / f"{case}.yaml.planned"
    if REFRESH:
        golden.write_text(actual)
        return
    assert golden.exists(), f"no golden for {case}: run `make refresh-goldens` and review it"
    expected = golden.read_text()
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(True), actual.splitlines(True), f"{case}.planned", "actual"
            )
        )
        pytest.fail(f"plan differs from the golden:\n{diff}")


def test_the_plan_never_changes_its_inputs() -> None:
    raw = yaml.safe_load((TESTDATA / "replace-unhealthy-after-timeout.yaml").read_text())
    before = yaml.safe_dump(raw)
    status = raw["status"]
    plan_fleet(
        parse_spec({"spec": raw["spec"]}),
        status,
        Observation(drivers={"aws"}),
        _health(raw.get("health")),
        uid="uid-1",
        now=parse_time(raw["now"]) or pytest.fail("bad time"),
    )
    assert yaml.safe_dump(raw) == before
