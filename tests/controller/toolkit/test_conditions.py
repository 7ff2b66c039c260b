"""The toolkit's pure parts: conditions and status merge patches."""

from __future__ import annotations

import pytest
import yaml

from controller.toolkit.conditions import (
    MESSAGE_LIMIT,
    condition,
    find_condition,
    is_true,
    remove_conditions,
    set_condition,
    set_conditions,
)
from controller.toolkit.status import status_patch
from tests.chart.helm import CHART


def test_a_bool_status_is_spelled_and_generation_none_is_left_out() -> None:
    assert condition("Ready", True, "Ok", generation=None) == {
        "type": "Ready",
        "status": "True",
        "reason": "Ok",
        "message": "",
    }
    assert condition("Ready", False, "No", "why", 3)["observedGeneration"] == 3


def test_restating_a_condition_keeps_its_transition_time_and_a_flip_moves_it() -> None:
    first = set_condition([], condition("Ready", "False", "Starting"), "T1")
    again = set_condition(first, condition("Ready", "False", "StillStarting", "m"), "T2")
    assert again[0]["lastTransitionTime"] == "T1" and again[0]["reason"] == "StillStarting"
    flipped = set_condition(again, condition("Ready", "True", "Up"), "T3")
    assert flipped[0]["lastTransitionTime"] == "T3"
    assert first[0]["reason"] == "Starting"  # pure: the input list is untouched


def test_conditions_keep_their_order_and_can_be_removed() -> None:
    start = set_conditions(
        [], [condition("A", True, "a"), condition("B", True, "b"), condition("C", True, "c")], "T"
    )
    updated = set_condition(start, condition("B", False, "b2"), "T2")
    assert [c["type"] for c in updated] == ["A", "B", "C"]
    assert not is_true(updated, "B") and is_true(updated, "A")
    assert [c["type"] for c in remove_conditions(updated, ["A", "C"])] == ["B"]
    assert find_condition(updated, "Z") is None


def test_status_patch_sends_only_changes_and_nulls_dropped_keys() -> None:
    assert status_patch({"phase": "Active"}, {"phase": "Active"}) is None
    assert status_patch(
        {"phase": "Failed", "reason": "x", "keep": 1}, {"phase": "A", "keep": 1}
    ) == {
        "phase": "A",
        "reason": None,
    }


def test_a_condition_message_loses_the_credentials_of_urls() -> None:
    built = condition("Ready", False, "PodBuildFailed", "image https://u:p4ss@reg.example/x")
    assert built["message"] == "image https://***@reg.example/x"


def test_a_long_message_is_cut_where_the_crds_still_take_it() -> None:
    # A message quoting what a user wrote could exceed the CRD's maxLength, and the API
    # server would then refuse the whole status write, again on every retry.
    built = condition("Ready", False, "RuntimeNotFound", "runtime " + "x" * 100_000)
    assert len(built["message"]) == MESSAGE_LIMIT
    assert built["message"].startswith("runtime xxx") and built["message"].endswith("…")
    short = condition("Ready", False, "RuntimeNotFound", "runtime x")
    assert short["message"] == "runtime x"
    checked: list[str] = []
    for crd in sorted((CHART / "crds").glob("*.yaml")):
        schema = yaml.safe_load(crd.read_text())["spec"]["versions"][0]["schema"]
        conditions = schema["openAPIV3Schema"]["properties"]["status"]["properties"]
        if "conditions" in conditions:
            message = conditions["conditions"]["items"]["properties"]["message"]
            assert message.get("maxLength", MESSAGE_LIMIT) >= MESSAGE_LIMIT, crd.name
            checked.append(crd.name)
    assert "workspaces.llmsafespaces.dev.yaml" in checked


@pytest.mark.parametrize("inside", [4, 10, 16, 24])
def test_url_credentials_are_stripped_before_the_message_is_cut(inside: int) -> None:
    """Rule: a condition message loses a URL's user and password BEFORE it is cut to
    MESSAGE_LIMIT; cut first, ``https://user:h…`` no longer looks like a URL with credentials
    and the part of the password before the cut reaches the status."""
    url = "https://deploy-user:hunter2-secret@git.example.com/repo.git"
    cut_at = MESSAGE_LIMIT - 1
    prefix = "package source failed: " + "x" * (cut_at - 23 - len("https://deploy-user:") - inside)
    built = condition("Ready", False, "PackagesFailed", prefix + url + " and more" * 50)
    assert len(built["message"]) == MESSAGE_LIMIT
    for piece in ("dep", "hun"):  # no part of the user or the password, however cut
        assert piece not in built["message"], built["message"][-40:]
