"""Platform boot failures: which container fails now, and what recovered."""

from __future__ import annotations

from typing import Any

import pytest

from controller.workspace.recovery import boot
from tests.controller.workspace.podstates import booted, completed, exited, pod, running, waiting

CRASH = exited(1, message="materialize: relay config: no such file")


@pytest.mark.parametrize(
    ("inits", "container", "code"),
    [
        (
            {"platform-init": {"ready": False, "state": {"terminated": exited(2)}}},
            "platform-init",
            2,
        ),
        (
            booted(**{"platform-materialize": waiting("CrashLoopBackOff", restarts=3, last=CRASH)}),
            "platform-materialize",
            1,
        ),
        (  # re-running after the failure: still the same episode until it completes
            booted(
                **{
                    "platform-bootstrap": {
                        **running(ready=False),
                        "lastState": {"terminated": CRASH},
                    }
                }
            ),
            "platform-bootstrap",
            1,
        ),
        (
            booted(agentd=waiting("CrashLoopBackOff", restarts=5, last=exited(137, "OOMKilled"))),
            "agentd",
            137,
        ),
    ],
    ids=["init-exited", "init-crash-loop", "init-retrying", "sidecar-crash-loop"],
)
def test_a_boot_container_failing_now_is_named_with_its_exit(
    inits: dict[str, Any], container: str, code: int
) -> None:
    found = boot.boot_failure(pod(inits=inits, sidecar=True))
    assert found is not None
    assert (found.container, found.exit_code, found.node) == (container, code, "node-a")
    assert found.describe().startswith(f"{container}: exit {code}")


@pytest.mark.parametrize(
    "inits",
    [
        booted(),
        # completed after an earlier failure
        booted(**{"platform-init": {**completed(), "lastState": {"terminated": CRASH}}}),
        # the sidecar crashed once and runs again: recovered, not a boot failure
        booted(
            agentd={
                **running(ready=False),
                "restartCount": 1,
                "lastState": {"terminated": exited(137)},
            }
        ),
        booted(agentd=running()),
    ],
    ids=["clean", "init-recovered", "sidecar-running-again", "sidecar-ready"],
)
def test_nothing_failing_now_is_not_a_boot_failure(inits: dict[str, Any]) -> None:
    assert boot.boot_failure(pod(inits=inits, sidecar=True)) is None


def test_the_workspace_container_and_workspace_setup_are_never_boot_failures() -> None:
    main = waiting("CrashLoopBackOff", restarts=3, last=exited(137))
    setup = waiting("CrashLoopBackOff", restarts=3, last=exited(1))
    assert (
        boot.boot_failure(pod(setup=True, inits=booted(**{"workspace-setup": setup}), main=main))
        is None
    )


def test_the_message_is_one_bounded_line() -> None:
    said = "line one\nline two\t" + "x" * 2000
    failure = boot.BootFailure("platform-init", 1, "Error", said, "node-a", 0)
    described = failure.describe()
    assert "\n" not in described and len(described) < 600
    assert boot.BootFailure("agentd", 137, "", "", "", 0).describe() == (
        "agentd: exit 137: it wrote no termination message"
    )


def test_an_episode_is_reported_once_per_failing_container() -> None:
    failed = boot.failed_condition(
        boot.BootFailure("agentd", 1, "", "", "n", 0), 1, "agentd: exit 1"
    )
    assert boot.reported([failed], "agentd")
    assert not boot.reported([failed], "platform-init")
    assert not boot.reported([boot.ready_condition(1)], "agentd")
    assert not boot.reported([], "agentd")
