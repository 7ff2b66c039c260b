"""The one definition of a workspace pod, and the receipt annotation's build and parse."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.admission import review_pod
from webhook.demo import DEMO_CONFIG
from wspin.core.contract import AGENTD, OPENCODE
from wspin.core.workspace_pod import (
    SELECTOR,
    artifacts_for,
    build_receipt,
    is_workspace_pod,
    parse_receipt,
    workspace_pod_problem,
)

WS = {"app": "llmsafespaces", "component": "workspace", "llmsafespaces.dev/workspace": "ws1"}


def pod(labels: dict[str, str], containers: tuple[str, ...] = ("workspace",)) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "labels": labels},
        "spec": {"containers": [{"name": n, "image": "busybox"} for n in containers]},
    }


@pytest.mark.parametrize(
    ("labels", "selected"),
    [
        (WS, True),
        ({"app": "llmsafespaces", "component": "workspace"}, True),
        ({"app": "llmsafespaces", "component": "api", "llmsafespaces.dev/workspace": "w"}, False),
        ({"app": "other", "component": "workspace"}, False),
        ({"llmsafespaces.dev/workspace": "w"}, False),
        ({}, False),
    ],
)
def test_the_two_selector_labels_make_a_workspace_pod(
    labels: dict[str, str], selected: bool
) -> None:
    assert is_workspace_pod(pod(labels)) is selected
    assert SELECTOR == "app=llmsafespaces,component=workspace"


def test_a_complete_workspace_pod_has_no_problem() -> None:
    assert workspace_pod_problem(pod(WS)) is None


@pytest.mark.parametrize("value", [None, ""])
def test_a_workspace_pod_without_its_workspace_label_is_refused_with_the_reason(
    value: str | None,
) -> None:
    labels = {k: v for k, v in WS.items() if k != "llmsafespaces.dev/workspace"}
    if value is not None:
        labels["llmsafespaces.dev/workspace"] = value
    problem = workspace_pod_problem(pod(labels))
    assert problem is not None
    assert "llmsafespaces.dev/workspace" in problem
    assert "app=llmsafespaces,component=workspace" in problem


def test_a_workspace_pod_without_a_workspace_container_names_what_it_has() -> None:
    problem = workspace_pod_problem(pod(WS, ("main", "log")))
    assert problem is not None
    assert "'main', 'log'" in problem
    assert "'workspace'" in problem


def test_the_injector_denies_a_squatting_pod_with_only_the_selector_labels() -> None:
    request = {
        "uid": "u1",
        "operation": "CREATE",
        "object": pod({"app": "llmsafespaces", "component": "workspace"}, ("workspace",)),
    }
    decision = review_pod(request, DEMO_CONFIG)
    assert decision.outcome == "denied"
    assert decision.response["allowed"] is False
    assert "llmsafespaces.dev/workspace" in decision.response["status"]["message"]


@pytest.mark.parametrize(
    ("name", "kind", "expected"),
    [
        ("workspace", "containers", (AGENTD, OPENCODE)),
        ("agentd", "containers", ()),
        ("helper", "containers", ()),
        ("agentd", "initContainers", (AGENTD,)),
        ("platform-init", "initContainers", (AGENTD,)),
        ("workspace", "initContainers", ()),
        ("platform-init", "ephemeralContainers", ()),
    ],
)
def test_which_container_gets_which_delivery_mount(
    name: str, kind: str, expected: tuple[object, ...]
) -> None:
    assert artifacts_for(name, kind) == expected


def test_the_receipt_round_trips_and_is_what_the_injector_writes() -> None:
    receipt = build_receipt({"opencode": "f" * 64, "agentd": "0" * 64})
    assert receipt == f'{{"agentd":"sha256:{"0" * 64}","opencode":"sha256:{"f" * 64}"}}'
    annotated = {"metadata": {"annotations": {"llmsafespaces.dev/delivery": receipt}}}
    assert parse_receipt(annotated) == {
        "agentd": "sha256:" + "0" * 64,
        "opencode": "sha256:" + "f" * 64,
    }
    assert DEMO_CONFIG.receipt == build_receipt(
        {"agentd": DEMO_CONFIG.agentd.digest, "opencode": DEMO_CONFIG.opencode.digest}
    )


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "",
        "not json",
        "[1]",
        '"x"',
        7,
        '{"agentd":"sha256:0123"}',
        '{"agentd":"latest"}',
        '{"agentd":"sha256:' + "0" * 64 + '","pad":"' + "x" * 4096 + '"}',
    ],
)
def test_a_missing_or_damaged_receipt_names_nothing(raw: object) -> None:
    annotations = {} if raw is None else {"llmsafespaces.dev/delivery": raw}
    assert parse_receipt({"metadata": {"annotations": annotations}}) == {}
    assert parse_receipt({}) == {}
