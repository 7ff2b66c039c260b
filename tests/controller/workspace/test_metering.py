"""Metering for billing: counters per Workspace and per user that move by the time and bytes
observed (never per pass), CPU from agentd's cumulative counter, and series bounded by caps
with an overflow bucket and removed with their Workspace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.types import ObjectKey
from controller.workspace.agent.metering import OVERFLOW, Account, Metering

START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
GiB = 1024**3
WS1, WS2, WS3 = ObjectKey("team-a", "ws1"), ObjectKey("team-a", "ws2"), ObjectKey("team-b", "ws1")


def account(key: ObjectKey, user: str = "alice", runtime: str = "python") -> Account:
    return Account(key.namespace, key.name, user, runtime, "standard")


def ws_labels(key: ObjectKey, user: str = "alice") -> dict[str, str]:
    return {"workspace_namespace": key.namespace, "workspace_id": key.name, "user_id": user}


def levels(runtime: str = "python") -> dict[str, str]:
    return {"runtime": runtime, "security_level": "standard"}


class Meters:
    def __init__(self, **caps: int) -> None:
        self.registry = CollectorRegistry()
        self.metering = Metering(self.registry, started=START, **caps)

    def value(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)

    def series(self, name: str) -> list[dict[str, str]]:
        family = name.removesuffix("_total")
        text = generate_latest(self.registry).decode()
        return [
            sample.labels
            for found in text_string_to_metric_families(text)
            if found.name == family
            for sample in found.samples
            if sample.name == family + "_total"
        ]


def test_active_time_and_byte_seconds_move_by_the_time_observed() -> None:
    m = Meters()
    m.metering.track(WS1, account(WS1))
    # Series exist at 0 from the start, so the first increase is seen.
    assert (
        m.value("llmsafespaces_workspace_active_seconds_total", **ws_labels(WS1), **levels()) == 0
    )
    m.metering.observe(WS1, account(WS1), 15.0, disk_bytes=2 * GiB, memory_bytes=GiB)
    m.metering.observe(WS1, account(WS1), 45.0, disk_bytes=GiB)
    m.metering.observe(WS2, account(WS2), 10.0, memory_bytes=GiB)
    m.metering.observe(WS2, account(WS2), 0.0, disk_bytes=GiB)  # no time, nothing counted
    assert (
        m.value("llmsafespaces_workspace_active_seconds_total", **ws_labels(WS1), **levels()) == 60
    )
    assert m.value("llmsafespaces_user_active_seconds_total", user_id="alice", **levels()) == 70
    disk = m.value("llmsafespaces_workspace_disk_used_bytes_seconds_total", **ws_labels(WS1))
    assert disk == 2 * GiB * 15 + GiB * 45
    assert m.value("llmsafespaces_user_disk_bytes_seconds_total", user_id="alice") == disk
    assert (
        m.value("llmsafespaces_workspace_memory_used_bytes_seconds_total", **ws_labels(WS1))
        == GiB * 15
    )
    assert m.value("llmsafespaces_user_memory_bytes_seconds_total", user_id="alice") == GiB * 25


def test_cpu_is_the_growth_of_agentds_counter_per_pod() -> None:
    m = Meters()
    fresh = START + timedelta(seconds=5)
    m.metering.observe_cpu(WS1, account(WS1), "pod-1", 3_000_000, pod_started=fresh)
    m.metering.observe_cpu(WS1, account(WS1), "pod-1", 5_500_000, pod_started=fresh)
    assert m.value("llmsafespaces_workspace_cpu_milliseconds_total", **ws_labels(WS1)) == 5_500
    # agentd started again within the pod: its counter began again from 0.
    m.metering.observe_cpu(WS1, account(WS1), "pod-1", 1_000_000, pod_started=fresh)
    # A new pod counts from 0.
    m.metering.observe_cpu(WS1, account(WS1), "pod-2", 2_000_000, pod_started=fresh)
    assert m.value("llmsafespaces_workspace_cpu_milliseconds_total", **ws_labels(WS1)) == 8_500
    assert m.value("llmsafespaces_user_cpu_milliseconds_total", user_id="alice") == 8_500


def test_cpu_a_pod_used_before_this_process_metered_it_is_not_counted_again() -> None:
    m = Meters()
    earlier = START - timedelta(hours=1)
    m.metering.observe_cpu(WS1, account(WS1), "pod-1", 60_000_000, pod_started=earlier)
    assert m.value("llmsafespaces_workspace_cpu_milliseconds_total", **ws_labels(WS1)) == 0
    m.metering.observe_cpu(WS1, account(WS1), "pod-1", 61_000_000, pod_started=earlier)
    assert m.value("llmsafespaces_workspace_cpu_milliseconds_total", **ws_labels(WS1)) == 1_000
    # An unknown start counts nothing rather than risk counting twice.
    m.metering.observe_cpu(WS2, account(WS2), "pod-9", 7_000_000)
    assert m.value("llmsafespaces_workspace_cpu_milliseconds_total", **ws_labels(WS2)) == 0


def test_a_deleted_workspace_takes_its_series_and_its_users_last_one_theirs() -> None:
    m = Meters()
    for key in (WS1, WS2):
        m.metering.observe(key, account(key), 10.0, disk_bytes=1)
    m.metering.forget(WS1)
    assert (
        m.value("llmsafespaces_workspace_active_seconds_total", **ws_labels(WS1), **levels())
        is None
    )
    assert (
        m.value("llmsafespaces_workspace_disk_used_bytes_seconds_total", **ws_labels(WS1)) is None
    )
    assert m.value("llmsafespaces_user_active_seconds_total", user_id="alice", **levels()) == 20
    m.metering.forget(WS2)
    m.metering.forget(WS2)  # twice is harmless
    assert m.series("llmsafespaces_user_active_seconds_total") == []
    assert m.series("llmsafespaces_workspace_cpu_milliseconds_total") == []
    assert len(m.metering) == 0


def test_past_the_caps_use_is_counted_in_the_overflow_bucket_and_places_are_freed() -> None:
    m = Meters(max_workspaces=2, max_users=1)
    m.metering.observe(WS1, account(WS1, "alice"), 10.0)
    m.metering.observe(WS2, account(WS2, "bob"), 20.0)  # a second user: over the user cap
    m.metering.observe(WS3, account(WS3, "alice"), 30.0)  # a third Workspace: over its cap
    assert (
        m.value(
            "llmsafespaces_workspace_active_seconds_total", **ws_labels(WS2, OVERFLOW), **levels()
        )
        == 20
    )
    overflow = {"workspace_namespace": "", "workspace_id": OVERFLOW, "user_id": OVERFLOW}
    assert m.value("llmsafespaces_workspace_active_seconds_total", **overflow, **levels()) == 30
    assert m.value("llmsafespaces_user_active_seconds_total", user_id="alice", **levels()) == 40
    assert m.value("llmsafespaces_user_active_seconds_total", user_id=OVERFLOW, **levels()) == 20
    # Totals are kept whatever the caps: every second is somewhere.
    total = sum(
        m.value("llmsafespaces_workspace_active_seconds_total", **labels) or 0
        for labels in m.series("llmsafespaces_workspace_active_seconds")
    )
    assert total == 60
    assert len(m.series("llmsafespaces_workspace_active_seconds")) == 3
    # Deleting Workspaces frees their places, and a user's with the user's last one.
    m.metering.forget(WS1)
    m.metering.forget(WS3)
    ws4 = ObjectKey("team-c", "ws4")
    m.metering.observe(ws4, account(ws4, "carol"), 5.0)
    assert m.value("llmsafespaces_user_active_seconds_total", user_id="carol", **levels()) == 5
    assert (
        m.value(
            "llmsafespaces_workspace_active_seconds_total", **ws_labels(ws4, "carol"), **levels()
        )
        == 5
    )


def test_an_owner_named_like_the_bucket_is_counted_in_it() -> None:
    m = Meters()
    m.metering.observe(WS1, account(WS1, OVERFLOW), 10.0)
    m.metering.forget(WS1)
    assert m.value("llmsafespaces_user_active_seconds_total", user_id=OVERFLOW, **levels()) == 10
    m.metering.observe(WS2, account(WS2, "bob"), 1.0)
    assert m.value("llmsafespaces_user_active_seconds_total", user_id="bob", **levels()) == 1


def test_a_new_runtime_moves_the_active_series_and_a_new_owner_moves_them_all() -> None:
    m = Meters()
    m.metering.observe(WS1, account(WS1), 10.0, disk_bytes=2)
    m.metering.observe(WS1, account(WS1, runtime="node"), 5.0, disk_bytes=2)
    assert [s["runtime"] for s in m.series("llmsafespaces_workspace_active_seconds")] == ["node"]
    assert m.value("llmsafespaces_workspace_disk_used_bytes_seconds_total", **ws_labels(WS1)) == 30
    m.metering.observe(WS1, account(WS1, "mallory", runtime="node"), 1.0)
    assert m.series("llmsafespaces_workspace_disk_used_bytes_seconds") == [
        ws_labels(WS1, "mallory")
    ]
    assert {s["user_id"] for s in m.series("llmsafespaces_user_active_seconds")} == {"mallory"}


def test_a_new_leadership_term_reads_every_pods_cpu_afresh_as_a_baseline() -> None:
    m = Meters()
    fresh = START + timedelta(seconds=5)
    m.metering.observe_cpu(WS1, account(WS1), "pod-1", 3_000_000, pod_started=fresh)
    # Another replica led meanwhile and counted what the pod used then.
    m.metering.new_term(START + timedelta(hours=1))
    m.metering.observe_cpu(WS1, account(WS1), "pod-1", 9_000_000, pod_started=fresh)
    m.metering.observe_cpu(WS1, account(WS1), "pod-1", 9_500_000, pod_started=fresh)
    assert m.value("llmsafespaces_workspace_cpu_milliseconds_total", **ws_labels(WS1)) == 3_500
    # A pod that started in this term counts from its start.
    later = START + timedelta(hours=2)
    m.metering.observe_cpu(WS1, account(WS1), "pod-2", 1_000_000, pod_started=later)
    assert m.value("llmsafespaces_workspace_cpu_milliseconds_total", **ws_labels(WS1)) == 4_500
