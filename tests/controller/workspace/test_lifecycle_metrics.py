"""The lifecycle metrics' API: what each call records, under which bounded labels."""

from __future__ import annotations

import datetime
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.workspace.reconcile.lifecycle_metrics import DURATION_BUCKETS, LifecycleMetrics

T0 = datetime.datetime(2026, 12, 1, 10, 0, tzinfo=datetime.UTC)


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def workspace(runtime: str = "python", **spec: Any) -> dict[str, object]:
    return {"metadata": {"name": "ws-of-someone"}, "spec": {"runtime": runtime, **spec}}


def test_an_activation_counts_a_transition_and_a_creation_by_bounded_kind() -> None:
    registry = CollectorRegistry()
    metrics = LifecycleMetrics(registry)
    metrics.transition(workspace(), "", "Creating")
    metrics.transition(workspace(), "Creating", "Active")
    metrics.transition(workspace("ghcr.io/acme/x@sha256:" + "a" * 64), "Creating", "Active")
    metrics.transition(workspace(), "Active", "Active")  # no change: nothing counted
    found = samples(registry)
    created = "llmsafespaces_workspaces_created_total"
    assert found[(created, (("runtime", "python"), ("security_level", "none")))] == 1
    assert found[(created, (("runtime", "image"), ("security_level", "none")))] == 1
    moves = "llmsafespaces_workspace_phase_transitions_total"
    assert found[(moves, (("from_phase", "Pending"), ("to_phase", "Creating")))] == 1
    assert found[(moves, (("from_phase", "Creating"), ("to_phase", "Active")))] == 2
    assert not any("ws-of-someone" in str(labels) for _, labels in found)


def test_a_phase_outside_the_enum_is_counted_as_unknown() -> None:
    registry = CollectorRegistry()
    LifecycleMetrics(registry).transition(workspace(), "Active", "x" * 300)
    moves = "llmsafespaces_workspace_phase_transitions_total"
    assert samples(registry)[(moves, (("from_phase", "Active"), ("to_phase", "Unknown")))] == 1


def test_creation_and_resume_times_land_in_their_buckets_even_past_ten_minutes() -> None:
    registry = CollectorRegistry()
    metrics = LifecycleMetrics(registry)
    metrics.first_active(workspace(packages=["numpy"]), T0, T0 + datetime.timedelta(seconds=42))
    metrics.first_active(workspace(), T0, T0 + datetime.timedelta(minutes=30))
    metrics.resumed(T0, T0 + datetime.timedelta(seconds=8), first=True)
    metrics.resumed(T0 + datetime.timedelta(seconds=5), T0, first=False)  # clock skew: 0
    found = samples(registry)
    create = "llmsafespaces_workspace_create_duration_seconds"
    packages = (("has_init_script", "false"), ("has_packages", "true"))
    assert found[(f"{create}_bucket", (*packages, ("le", "30.0")))] == 0
    assert found[(f"{create}_bucket", (*packages, ("le", "45.0")))] == 1
    plain = (("has_init_script", "false"), ("has_packages", "false"))
    assert found[(f"{create}_bucket", (*plain, ("le", "300.0")))] == 0
    assert found[(f"{create}_count", plain)] == 1
    resume = "llmsafespaces_workspace_resume_duration_seconds"
    assert found[(f"{resume}_sum", (("resume_type", "first_resume"),))] == 8
    assert found[(f"{resume}_sum", (("resume_type", "subsequent_resume"),))] == 0
    assert DURATION_BUCKETS[-1] == 300


def test_a_finished_deletion_is_counted_once() -> None:
    registry = CollectorRegistry()
    LifecycleMetrics(registry).deletion_finished(workspace(securityLevel="high"))
    deleted = "llmsafespaces_workspaces_deleted_total"
    key = (deleted, (("runtime", "python"), ("security_level", "high")))
    assert samples(registry)[key] == 1


def written(metrics: LifecycleMetrics, old: dict[str, object], new: dict[str, object]) -> None:
    metrics.status_written(workspace(), old, new, T0)


def test_the_first_activation_observes_the_creation_from_pending_at() -> None:
    registry = CollectorRegistry()
    metrics = LifecycleMetrics(registry)
    pending: dict[str, object] = {"phase": "Creating", "pendingAt": "2026-12-01T09:59:18Z"}
    written(metrics, pending, {"phase": "Active"})
    found = samples(registry)
    create = "llmsafespaces_workspace_create_duration_seconds"
    plain = (("has_init_script", "false"), ("has_packages", "false"))
    assert found[(f"{create}_sum", plain)] == 42
    moves = "llmsafespaces_workspace_phase_transitions_total"
    assert found[(moves, (("from_phase", "Creating"), ("to_phase", "Active")))] == 1
    # Active again later (after a failure, without an anchor): counted, no creation time.
    written(metrics, {"phase": "Creating"}, {"phase": "Active"})
    assert samples(registry)[(f"{create}_count", plain)] == 1


def test_a_resume_is_first_only_for_the_first_resume_count() -> None:
    registry = CollectorRegistry()
    metrics = LifecycleMetrics(registry)
    first = {"phase": "Creating", "resumedAt": "2026-12-01T09:59:52Z", "resumeCount": 1}
    written(metrics, first, {"phase": "Active"})
    later = {"phase": "Creating", "resumedAt": "2026-12-01T09:59:30Z", "resumeCount": 2}
    written(metrics, later, {"phase": "Active"})
    found = samples(registry)
    resume = "llmsafespaces_workspace_resume_duration_seconds"
    assert found[(f"{resume}_sum", (("resume_type", "first_resume"),))] == 8
    assert found[(f"{resume}_sum", (("resume_type", "subsequent_resume"),))] == 30


def test_a_first_status_is_no_transition_from_pending_to_pending() -> None:
    registry = CollectorRegistry()
    metrics = LifecycleMetrics(registry)
    written(metrics, {}, {"phase": "Pending"})
    moves = "llmsafespaces_workspace_phase_transitions_total"
    assert not [key for key in samples(registry) if key[0] == moves]


def test_the_setup_run_of_the_pod_that_made_the_workspace_active_is_observed_once() -> None:
    registry = CollectorRegistry()
    metrics = LifecycleMetrics(registry)
    setup = "llmsafespaces_workspace_init_container_duration_seconds"
    metrics.status_written(
        workspace(), {"phase": "Creating"}, {"phase": "Active"}, T0, setup_seconds=7.5
    )
    # Still Active on a later pass, and a pod without workspace-setup: nothing more.
    metrics.status_written(
        workspace(), {"phase": "Active"}, {"phase": "Active"}, T0, setup_seconds=7.5
    )
    metrics.status_written(workspace(), {"phase": "Creating"}, {"phase": "Active"}, T0)
    found = samples(registry)
    assert found[(f"{setup}_count", ())] == 1
    assert found[(f"{setup}_sum", ())] == 7.5
    assert found[(f"{setup}_bucket", (("le", "10.0"),))] == 1
    assert found[(f"{setup}_bucket", (("le", "5.0"),))] == 0
