"""The failure classifier over recorded pod statuses (one per reason, in
``testdata/failures``), and the count of a pod's container exits."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from controller.workspace.recovery import failures as fl
from wspin.core.objects import Obj

CASES = Path(__file__).resolve().parent / "testdata" / "failures"
NAMES = sorted(path.stem for path in CASES.glob("*.yaml"))


def case(name: str) -> Obj:
    loaded: Obj = yaml.safe_load((CASES / f"{name}.yaml").read_text())
    return loaded


def test_every_reason_has_a_case() -> None:
    assert len(NAMES) >= 20
    reasons = {case(name)["expect"]["reason"] for name in NAMES}
    assert {"OOMKilled", "Evicted", "Unschedulable", "ImagePullBackOff", "ErrImagePull"} <= reasons
    assert {"CreateContainerConfigError", "CrashLoopBackOff", "EvictionByEvictionAPI"} <= reasons


@pytest.mark.parametrize("name", NAMES)
def test_each_recorded_pod_status_gets_its_class_reason_and_container(name: str) -> None:
    recorded = case(name)
    found = fl.classify(recorded["pod"])
    expect = recorded["expect"]
    assert (found.failure_class, found.reason, found.container) == (
        expect["class"],
        expect["reason"],
        expect["container"],
    )


def test_no_pod_is_an_infrastructure_loss() -> None:
    assert fl.classify(None) == fl.Failure("Infrastructure", "PodLost", "the workspace pod is gone")


@pytest.mark.parametrize(
    "broken",
    [
        {},
        {"status": "Failed"},
        {"status": {"containerStatuses": "x", "conditions": [1, None]}},
        {"status": {"containerStatuses": [{"name": 3, "state": {"waiting": "CrashLoopBackOff"}}]}},
        {"status": {"initContainerStatuses": [{"state": {"terminated": {"exitCode": "1"}}}]}},
    ],
)
def test_a_malformed_status_is_a_process_failure_and_never_a_crash(broken: Obj) -> None:
    assert fl.classify(broken).failure_class == "Process"
    assert fl.crash_count(broken) == 0


def container(restarts: int, state: Obj, last: Obj | None = None) -> Obj:
    status: Obj = {"name": "workspace", "restartCount": restarts, "state": state}
    if last is not None:
        status["lastState"] = {"terminated": last}
    return {
        "metadata": {"uid": "u1"},
        "status": {"phase": "Running", "containerStatuses": [status]},
    }


EXIT_1 = {"exitCode": 1, "reason": "Error", "finishedAt": "2026-11-29T11:00:00Z"}


@pytest.mark.parametrize(
    ("pod", "exits"),
    [
        (container(0, {"running": {}}), 0),
        (container(0, {"terminated": EXIT_1}), 1),  # exited, not restarted yet
        (container(0, {"waiting": {"reason": "CrashLoopBackOff"}}, EXIT_1), 1),
        (container(1, {"running": {}}, EXIT_1), 1),  # restarted after that exit
        (container(1, {"waiting": {"reason": "CrashLoopBackOff"}}, EXIT_1), 2),
        (container(5, {"running": {}}, EXIT_1), 5),
        (container(0, {"waiting": {"reason": "ContainerCreating"}}), 0),
    ],
)
def test_exits_are_the_restarts_plus_the_exit_not_restarted_after_yet(pod: Obj, exits: int) -> None:
    assert fl.crash_count(pod) == exits


def test_the_exit_count_never_falls_as_a_crash_loop_goes_round() -> None:
    cycle = [
        container(0, {"running": {}}),
        container(0, {"terminated": EXIT_1}),
        container(0, {"waiting": {"reason": "CrashLoopBackOff"}}, EXIT_1),
        container(1, {"running": {}}, EXIT_1),
        container(1, {"terminated": EXIT_1}, EXIT_1),
        container(1, {"waiting": {"reason": "CrashLoopBackOff"}}, EXIT_1),
        container(2, {"running": {}}, EXIT_1),
    ]
    counts = [fl.crash_count(pod) for pod in cycle]
    assert counts == sorted(counts) and counts[-1] == 2


def test_a_pod_that_ended_or_is_deleted_killed_its_containers_itself() -> None:
    ended = container(2, {"terminated": {**EXIT_1, "exitCode": 137}}, EXIT_1)
    ended["status"]["phase"] = "Failed"
    assert fl.crash_count(ended) == 2
    deleting = container(2, {"terminated": {**EXIT_1, "exitCode": 143}}, EXIT_1)
    deleting["metadata"]["deletionTimestamp"] = "2026-11-29T11:00:00Z"
    assert fl.crash_count(deleting) == 2


def test_the_last_crash_is_the_latest_exit_of_any_main_container() -> None:
    pod = container(3, {"waiting": {"reason": "CrashLoopBackOff"}}, EXIT_1)
    other = copy.deepcopy(pod["status"]["containerStatuses"][0])
    other.update(
        name="helper",
        lastState={
            "terminated": {
                "exitCode": 137,
                "reason": "OOMKilled",
                "finishedAt": "2026-11-29T11:05:00Z",
            }
        },
    )
    pod["status"]["containerStatuses"].append(other)
    crash = fl.last_crash(pod)
    assert crash is not None
    assert (crash.container, crash.reason, crash.failure_class) == (
        "helper",
        "OOMKilled",
        "Resource",
    )
    assert crash.waiting
    assert fl.last_crash(container(0, {"running": {}})) is None
