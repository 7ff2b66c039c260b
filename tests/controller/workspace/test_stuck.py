"""A pod that does not start: the reason, a message naming what to change, and the threshold
after which it counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.workspace.recovery import stuck
from controller.workspace.recovery.pod_events import PodEvent
from tests.controller.workspace.podstates import (
    AGENTD_IMAGE,
    RUNTIME_IMAGE,
    booted,
    completed,
    exited,
    pod,
    running,
    unschedulable,
    waiting,
)

CREATED = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return CREATED + timedelta(seconds=seconds)


def detect(
    p: dict[str, Any], seconds: float, events: tuple[PodEvent, ...] = ()
) -> stuck.Stuck | None:
    return stuck.detect(p, created=CREATED, now=at(seconds), events=events)


class TestUnschedulable:
    def test_reported_at_once_and_counted_only_past_five_minutes(self) -> None:
        p = pod(
            node="", conditions=unschedulable("0/3 nodes are available: 3 Insufficient memory.")
        )
        found = detect(p, 240)
        assert found is not None and found.reason == "Unschedulable"
        assert found.failure_class == "Infrastructure"
        assert not found.overdue(at(240)) and found.overdue(at(300))
        assert "cpu=500m, memory=512Mi" in found.message and "spec.memory" in found.message
        assert found.message.startswith("no node can run the workspace pod (4 min so far)")
        assert found.message.endswith("scheduler: 0/3 nodes are available: 3 Insufficient memory.")

    def test_a_node_selector_no_node_matches_names_the_selector_and_the_field(self) -> None:
        said = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
        found = detect(pod(node="", conditions=unschedulable(said)), 10)
        assert found is not None
        assert "kubernetes.io/arch=amd64" in found.message and "spec.architecture" in found.message

    def test_an_unbound_claim_names_the_claim(self) -> None:
        said = "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
        found = detect(pod(node="", conditions=unschedulable(said)), 10)
        assert found is not None
        assert "PersistentVolumeClaim workspace-ws1 is not bound" in found.message
        assert "kubectl describe pvc -n team-a workspace-ws1" in found.message

    def test_taints_and_zones_point_at_the_platform_team(self) -> None:
        said = (
            "0/2 nodes are available: 1 node(s) had untolerated taint {gpu: true}, "
            "1 node(s) had volume node affinity conflict."
        )
        found = detect(pod(node="", conditions=unschedulable(said)), 10)
        assert found is not None
        assert "tainted" in found.message and "another zone" in found.message


class TestNotStarted:
    def test_the_workspace_image_that_cannot_be_pulled_names_the_image_and_spec_runtime(
        self,
    ) -> None:
        said = f'Back-off pulling image "{RUNTIME_IMAGE}"'
        p = pod(inits=booted(), main=waiting("ImagePullBackOff", said))
        found = detect(p, 30)
        assert found is not None
        assert (found.reason, found.failure_class, found.container) == (
            "ImagePullFailed",
            "Configuration",
            "workspace",
        )
        assert RUNTIME_IMAGE in found.message and "spec.runtime" in found.message

    def test_the_platform_image_that_cannot_be_pulled_is_the_platform_teams(self) -> None:
        said = f'Back-off pulling image "{AGENTD_IMAGE}"'
        found = detect(pod(inits={"platform-init": waiting("ImagePullBackOff", said)}), 30)
        assert found is not None and found.reason == "PlatformImagePullFailed"
        assert "platform team" in found.message and found.container == "platform-init"

    @pytest.mark.parametrize(
        ("said", "named", "secret"),
        [
            (
                'secret "db-credentials" not found',
                "Secret team-a/db-credentials does not exist",
                "db-credentials",
            ),
            ('configmap "app-config" not found', "ConfigMap team-a/app-config does not exist", ""),
            (
                "couldn't find key admin-token in Secret team-a/workspace-pw-ws1",
                "Secret team-a/workspace-pw-ws1 has no key admin-token",
                "workspace-pw-ws1",
            ),
            (
                "container has runAsNonRoot and image will run as root "
                '(pod: "ws1", container: workspace)',
                "its image runs as root",
                "",
            ),
        ],
    )
    def test_a_config_error_names_the_secret_or_configmap_or_the_image_user(
        self, said: str, named: str, secret: str
    ) -> None:
        found = detect(pod(inits=booted(), main=waiting("CreateContainerConfigError", said)), 30)
        assert found is not None and found.reason == "ContainerConfigError"
        assert named in found.message and found.missing_secret == secret

    def test_a_volume_that_cannot_be_mounted_names_its_claim_from_the_events(self) -> None:
        event = PodEvent(
            "FailedAttachVolume",
            'AttachVolume.Attach failed for volume "workspace" : rpc error: '
            "code = DeadlineExceeded",
            at(100),
        )
        found = detect(pod(main=waiting("PodInitializing")), 120, (event,))
        assert found is not None and found.reason == "VolumeMountFailed"
        assert found.failure_class == "Infrastructure"
        assert "volume workspace (PersistentVolumeClaim workspace-ws1)" in found.message

    def test_a_missing_secret_volume_is_configuration_and_named_for_restoring(self) -> None:
        event = PodEvent(
            "FailedMount",
            'MountVolume.SetUp failed for volume "pw-secret" : secret "workspace-pw-ws1" not found',
            at(100),
        )
        found = detect(pod(main=waiting("PodInitializing")), 120, (event,))
        assert found is not None and found.failure_class == "Configuration"
        assert "volume pw-secret (Secret workspace-pw-ws1)" in found.message
        assert found.missing_secret == "workspace-pw-ws1"

    def test_nothing_known_is_reported_and_counted_after_ten_minutes(self) -> None:
        p = pod(inits=booted(), main=waiting("ContainerCreating"))
        found = detect(p, 700)
        assert found is not None and found.reason == "PodNotStarted"
        assert "container workspace has not started" in found.message
        # Measured from the last init's completion (12:00:20), not the pod's creation.
        assert found.since == at(20) and not found.overdue(at(619)) and found.overdue(at(620))

    def test_a_slow_init_does_not_eat_the_next_containers_time(self) -> None:
        inits = {
            **booted(),
            "workspace-setup": completed("2026-11-29T12:09:00Z"),
        }
        found = detect(pod(setup=True, inits=inits, main=waiting("ContainerCreating")), 660)
        assert found is not None and not found.overdue(at(660))

    def test_a_sandbox_failure_names_the_runtime_class(self) -> None:
        p = pod(main=waiting("ContainerCreating"))
        p["spec"]["runtimeClassName"] = "gvisor"
        event = PodEvent(
            "FailedCreatePodSandBox",
            'Failed to create pod sandbox: rpc error: no runtime for "runsc" is configured',
            at(50),
        )
        found = detect(p, 60, (event,))
        assert found is not None and "RuntimeClass gvisor" in found.message

    def test_a_started_pod_is_not_stuck(self) -> None:
        assert detect(pod(inits=booted(), main=running(), phase="Running"), 3600) is None


class TestInitCrashLoop:
    def test_workspace_setup_crashing_is_a_process_failure_after_ten_minutes(self) -> None:
        setup = waiting(
            "CrashLoopBackOff", restarts=4, last=exited(1, message="pip: no such package")
        )
        found = detect(pod(setup=True, inits=booted(**{"workspace-setup": setup})), 120)
        assert found is not None and found.reason == "InitContainerFailing"
        assert found.failure_class == "Process" and not found.overdue(at(120))
        assert found.overdue(at(600))
        assert "spec.packages" in found.message and "pip: no such package" in found.message
        assert "kubectl logs -n team-a ws1-b8985526 -c workspace-setup --previous" in found.message

    def test_killed_for_memory_it_is_a_resource_failure(self) -> None:
        setup = waiting("CrashLoopBackOff", restarts=2, last=exited(137, "OOMKilled"))
        found = detect(pod(setup=True, inits=booted(**{"workspace-setup": setup})), 120)
        assert found is not None and found.failure_class == "Resource"
        assert "spec.memoryLimit" in found.message

    def test_a_platform_init_crashing_is_a_boot_failure_not_a_stuck_pod(self) -> None:
        crashing = waiting("CrashLoopBackOff", restarts=9, last=exited(1))
        assert detect(pod(inits={"platform-init": crashing}), 3600) is None


def test_events_are_read_only_for_a_start_its_status_does_not_explain_after_a_minute() -> None:
    creating = pod(inits=booted(), main=waiting("ContainerCreating"))
    assert stuck.needs_events(creating, CREATED, at(10)) == at(80)  # after the last init
    pulling = pod(inits=booted(), main=waiting("ImagePullBackOff", "Back-off"))
    assert stuck.needs_events(pulling, CREATED, at(300)) is None
    assert stuck.needs_events(pod(inits=booted(), main=running()), CREATED, at(300)) is None
    unplaced = pod(node="", conditions=unschedulable("0/1 nodes are available"))
    assert stuck.needs_events(unplaced, CREATED, at(300)) is None


def test_the_kubelets_text_is_quoted_redacted_and_cut_never_alone() -> None:
    said = "failed to pull https://robot:s3cr3t-t0ken@registry.example.com/v2/x " + "y" * 2000
    found = stuck.detect(
        pod(inits=booted(), main=waiting("ErrImagePull", said)),
        created=CREATED,
        now=at(30),
        redact=lambda text: text.replace("s3cr3t-t0ken", "[redacted]"),
    )
    assert found is not None
    assert "s3cr3t-t0ken" not in found.message and "[redacted]" in found.message
    assert found.message.startswith("the workspace image")
    assert len(found.message) < 1000
