"""Phase and Ready from pod facts: the transitions a Workspace's pod drives, as a table."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from controller.workspace.pod.facts import pod_facts
from controller.workspace.pod.phase import (
    POD_FAILED_DURING_CREATION,
    TRANSIENT_POD_LOSS,
    observe,
    recycling,
    served_before,
)
from tests.controller.workspace.lifecycle_pods import (
    DELETED,
    EVICTED,
    READY,
    RUNNING,
    SCHEDULED,
    STARTED,
    UNREADY,
    UNREADY_POD,
    UNSCHEDULABLE,
    UNSCHEDULED,
    pod,
)
from wspin.core.objects import Obj


@pytest.mark.parametrize(
    ("case", "facts", "previous", "phase", "reason", "failure"),
    [
        ("new, no pod yet", None, "", "Pending", "PodPending", ""),
        ("not scheduled", UNSCHEDULED, "Pending", "Pending", "PodPending", ""),
        ("no node fits", UNSCHEDULABLE, "Pending", "Pending", "PodPending", ""),
        ("scheduled", SCHEDULED, "Pending", "Creating", "PodStarting", ""),
        ("started", STARTED, "Creating", "Creating", "PodStarting", ""),
        ("ready", READY, "Creating", "Active", "PodReady", ""),
        ("stays ready", READY, "Active", "Active", "PodReady", ""),
        ("unready after Active", UNREADY_POD, "Active", "Creating", "PodNotReady", ""),
        ("ready again", READY, "Creating", "Active", "PodReady", ""),
        ("gone while Active", None, "Active", "Creating", "PodLost", TRANSIENT_POD_LOSS),
        (
            "deleted while Active",
            DELETED,
            "Active",
            "Creating",
            "PodTerminating",
            TRANSIENT_POD_LOSS,
        ),
        ("evicted while Active", EVICTED, "Active", "Creating", "PodEvicted", TRANSIENT_POD_LOSS),
        (
            "evicted while starting",
            EVICTED,
            "Creating",
            "Creating",
            "PodEvicted",
            POD_FAILED_DURING_CREATION,
        ),
        ("replacement unscheduled", UNSCHEDULED, "Creating", "Creating", "PodPending", ""),
        ("resumed, no pod yet", None, "Resuming", "Creating", "PodPending", ""),
        ("resumed, unscheduled", UNSCHEDULED, "Resuming", "Creating", "PodPending", ""),
    ],
)
def test_the_phase_follows_the_pod(
    case: str, facts: Obj | None, previous: str, phase: str, reason: str, failure: str
) -> None:
    seen = observe(pod_facts(facts) if facts is not None else None, previous)
    assert (seen.phase, seen.reason, seen.failure_reason) == (phase, reason, failure), case


@pytest.mark.parametrize(
    ("case", "facts"),
    [
        ("Running but no IP yet", pod(phase="Running", node="n1", ready=True, main=RUNNING)),
        ("Ready condition False", pod(phase="Running", node="n1", ip="10.0.0.7", main=RUNNING)),
        (
            "main container unready",
            pod(phase="Running", node="n1", ip="1.2.3.4", ready=True, main=UNREADY),
        ),
        ("no container status", pod(phase="Running", node="n1", ip="10.0.0.7", ready=True)),
        (
            "sidecar unready",
            pod(
                phase="Running", node="n1", ip="10.0.0.7", ready=True, main=RUNNING, sidecar=UNREADY
            ),
        ),
        ("being deleted", DELETED),
    ],
)
def test_active_needs_running_an_ip_and_every_container_ready(case: str, facts: Obj) -> None:
    assert observe(pod_facts(facts), "Creating").phase == "Creating", case


def test_a_ready_sidecar_pod_is_active() -> None:
    facts = pod(
        phase="Running", node="n1", ip="10.0.0.7", ready=True, main=RUNNING, sidecar=RUNNING
    )
    assert observe(pod_facts(facts), "Creating").phase == "Active"


def test_the_messages_say_what_the_pod_waits_for() -> None:
    assert "3 Insufficient memory" in observe(pod_facts(UNSCHEDULABLE), "Pending").message
    unready = observe(pod_facts(UNREADY_POD), "Active").message
    assert unready == "workspace pod is not ready: workspace (waiting: CrashLoopBackOff)"
    assert "low on resource: memory" in observe(pod_facts(EVICTED), "Active").message


def test_a_pod_the_controller_replaces_on_purpose_is_not_a_failure() -> None:
    seen = recycling("Active", "restartGeneration changed to 2")
    assert (seen.phase, seen.reason, seen.failure_reason) == ("Creating", "PodRecreating", "")
    assert recycling("Pending", "architecture changed to arm64").phase == "Pending"


def test_a_malformed_status_reads_as_not_ready_never_as_a_crash() -> None:
    hostile = {
        "metadata": {"name": 7, "creationTimestamp": ["x"]},
        "spec": {"containers": "workspace", "nodeName": {"a": 1}},
        "status": {"phase": None, "podIP": 5, "conditions": [None, "x", {"type": "Ready"}]},
    }
    facts = pod_facts(hostile)
    assert not facts.serving and facts.ip == "" and facts.name == ""
    assert observe(facts, "Active").phase == "Creating"


def test_a_pod_that_served_before_stays_not_ready_on_every_later_pass() -> None:
    facts = pod_facts(UNREADY_POD)  # created 11:00
    status = {"phase": "Creating", "startTime": "2026-11-29T11:02:00Z"}  # Active at 11:02
    assert served_before(status, facts)
    seen = observe(facts, "Creating", served=served_before(status, facts))
    assert (seen.phase, seen.reason) == ("Creating", "PodNotReady")


def test_a_new_pod_did_not_serve_before_whatever_the_old_start_time() -> None:
    facts = pod_facts(UNREADY_POD)
    assert not served_before({"startTime": "2026-11-29T10:00:00Z"}, facts)
    assert not served_before({}, facts)
    assert observe(facts, "Creating", served=False).reason == "PodStarting"


def test_the_setup_containers_run_time_is_read_only_from_a_completed_run() -> None:
    def pod_with(setup: Mapping[str, object]) -> dict[str, object]:
        return {
            "metadata": {"name": "ws1-b8985526"},
            "status": {"initContainerStatuses": [{"name": "workspace-setup", "state": setup}]},
        }

    done = {
        "terminated": {
            "exitCode": 0,
            "startedAt": "2026-12-01T10:00:00Z",
            "finishedAt": "2026-12-01T10:00:42Z",
        }
    }
    assert pod_facts(pod_with(done)).setup_seconds == 42
    failed = {"terminated": {**done["terminated"], "exitCode": 1}}
    backwards = {"terminated": {**done["terminated"], "finishedAt": "2026-12-01T09:00:00Z"}}
    for state in (failed, backwards, {"running": {"startedAt": "2026-12-01T10:00:00Z"}}, {}):
        assert pod_facts(pod_with(state)).setup_seconds is None
    assert pod_facts({"metadata": {"name": "p"}}).setup_seconds is None
