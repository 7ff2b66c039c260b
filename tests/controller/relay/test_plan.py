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

import pytest
import yaml

from controller.relay.actions import Observation
from controller.relay.plan import plan_fleet
from controller.relay.spec import parse_spec
from tests.controller.relay.plan_cases import CASES, TESTDATA, health_report, plan_case, render
from wspin.core.clock import parse_time

REFRESH = os.environ.get("WSPIN_REFRESH_GOLDEN") == "1"


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
        health_report(raw.get("health")),
        uid="uid-1",
        now=parse_time(raw["now"]) or pytest.fail("bad time"),
    )
    assert yaml.safe_dump(raw) == before
