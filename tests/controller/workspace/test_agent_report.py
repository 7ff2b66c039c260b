"""agentd's answers read into typed values: every field type-checked and bounded, since the pod
that answers runs the tenant's code; and the liveness verdict of each kind of answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controller.workspace.agent.answers import (
    MAX_SESSIONS,
    TEXT_MAX,
    Delivery,
    PendingApply,
    Unreadable,
    Usage,
    parse_health,
    parse_status,
)
from controller.workspace.agent.client import Answer
from controller.workspace.agent.scheduler import judge_health, phase_of, scrape_address
from tests.support.agentd import busy, healthy_health, healthy_status
from wspin.core.contract import AGENTD, MAIN_CONTAINER
from wspin.core.objects import Obj


def body(report: object) -> bytes:
    return json.dumps(report).encode()


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ({"relayRevision": "r1", "degradedReason": "x"}, Delivery("r1", "x")),
        (
            {"relay": {"degradedReason": "token_expired"}, "degradedReason": "spawn"},
            Delivery("", "token_expired"),
        ),
        (
            {"relay": {"degradedReason": ""}, "degradedReason": "spawn_env_pending"},
            Delivery("", "spawn_env_pending"),
        ),
        (
            {"relay": {"appliedRevision": "r2"}, "relayRevision": "r1"},
            Delivery("r2", ""),
        ),
        (
            {"spawnEnv": {"spawnedRev": "9", "degraded": True, "reason": "files_pending"}},
            Delivery("", "files_pending", "9"),
        ),
        ({"relayRevision": 7, "relay": "broken"}, Delivery()),
    ],
)
def test_what_the_pod_applied(report: Obj, expected: Delivery) -> None:
    assert parse_health(body(report)).delivery == expected


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"[]", "healthz answer is not a JSON object"),
        (b"not json", "healthz answer is not JSON"),
        (b"\xff\xfe", "healthz answer is not JSON"),
        (b'{"a": NaN', "healthz answer is not JSON"),
    ],
)
def test_a_body_that_is_not_an_object_is_unreadable(raw: bytes, why: str) -> None:
    with pytest.raises(Unreadable, match=why):
        parse_health(raw)


def test_a_health_report_is_read_field_by_field() -> None:
    health = parse_health(
        body(
            healthy_health(
                warnings=["w1", 7, "", "w2"],
                userCredsPresent=True,
                pendingApply={"reason": "relay", "busySessions": ["a", "b"]},
            )
        )
    )
    assert (health.healthy, health.version) == (True, "1.4.0")
    assert health.warnings == ("w1", "w2")
    assert health.user_creds_present is True
    assert health.pending_apply == PendingApply("relay", 2)
    assert parse_health(body({"healthy": "yes"})).healthy is None


def test_a_pod_cannot_put_unbounded_text_or_lists_into_status() -> None:
    huge = "r" * 10_000
    health = parse_health(body({"relayRevision": huge, "warnings": [huge] * 100}))
    assert len(health.delivery.relay_revision) == TEXT_MAX
    assert len(health.warnings) == 8 and all(len(w) == TEXT_MAX for w in health.warnings)
    sessions: list[Obj] = [{"id": f"s{i}", "title": huge, "status": "idle"} for i in range(500)]
    sessions.append({"id": "busy-one", "status": "busy", "contextUsed": 5})
    sessions += [{"id": f"t{i}", "status": "busy"} for i in range(100_000)]  # past the scan
    status = parse_status(body(healthy_status(sessions=sessions)))
    assert len(status.sessions) == MAX_SESSIONS
    assert status.sessions[0].id == "busy-one"  # busy sessions first
    assert status.sessions_active == 0  # the report's own count, not ours
    assert all(len(s.title) <= TEXT_MAX for s in status.sessions)


def test_a_deep_status_is_read_field_by_field() -> None:
    status = parse_status(body(busy(("s1", 41000))))
    assert (status.healthy, status.ready, status.connected) == (True, True, ("anthropic",))
    assert status.busy() == {"s1": 41000}
    assert status.sessions_active == 1
    assert status.disk == Usage(2 * 1024**3, 10 * 1024**3)
    assert (status.cpu_usage_micros, status.cpu_limit_micros_per_sec) == (1_500_000, 2_000_000)
    assert status.context == Usage(0, 200_000)


@pytest.mark.parametrize("value", [-1, "12", True, 1.5e300, float("nan"), None, [], {"x": 1}])
def test_numbers_of_the_wrong_kind_read_as_absent(value: object) -> None:
    raw = json.dumps(healthy_status(disk={"used_bytes": value, "total_bytes": 100}))
    assert parse_status(raw.encode()).disk is None


def test_a_deep_status_without_a_verdict_is_unreadable() -> None:
    with pytest.raises(Unreadable, match="no boolean 'healthy'"):
        parse_status(body({"ready": True}))


def test_sessions_active_falls_back_to_the_busy_count() -> None:
    report = busy(("a", 1), ("b", 2))
    del report["sessions_active"]
    assert parse_status(body(report)).sessions_active == 2


@pytest.mark.parametrize(
    ("answer", "verdict", "detail"),
    [
        (Answer(200, body(healthy_health())), "ok", ""),
        (Answer(200, body(healthy_health(healthy=False))), "unhealthy", "HTTP 200"),
        (Answer(503, body(healthy_health(healthy=False))), "unhealthy", "HTTP 503"),
        (Answer(503, b"overloaded"), "unhealthy", "HTTP 503"),
        (Answer(500, body(healthy_health())), "unhealthy", "HTTP 500"),
        (Answer(200, b"<html/>"), "unreadable", "healthz answer is not JSON"),
        (Answer(200, body({"up": 1})), "unreadable", "no boolean 'healthy'"),
        (Answer(404, b"not found"), "unreadable", "HTTP 404"),
        (Answer(401, body(healthy_health())), "unreadable", "HTTP 401"),
        (Answer(200, b"", too_large=True), "unreadable", "exceeds 65536 bytes"),
    ],
)
def test_the_liveness_verdict_of_each_answer(answer: Answer, verdict: str, detail: str) -> None:
    judged = judge_health(answer)
    assert judged.verdict == verdict
    assert detail in judged.detail


def pod(**status: Any) -> Obj:
    return {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {"name": "sidecar", "env": [{"name": AGENTD.marker_env, "value": "1"}]},
                {"name": MAIN_CONTAINER, "env": [{"name": AGENTD.marker_env, "value": "1"}]},
            ]
        },
        "status": {"phase": "Running", "podIP": "10.0.0.7", **status},
    }


def test_only_running_pods_with_agentd_delivered_are_read() -> None:
    assert scrape_address(pod()) == "10.0.0.7"
    assert scrape_address(None) is None
    assert scrape_address(pod(phase="Pending")) is None
    assert scrape_address(pod(podIP="")) is None
    deleting = pod()
    deleting["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    assert scrape_address(deleting) is None
    unmarked = pod()
    unmarked["spec"]["containers"][1]["env"] = [{"name": AGENTD.marker_env, "value": "0"}]
    assert scrape_address(unmarked) is None


def test_phases_spread_over_the_interval() -> None:
    phases = sorted(phase_of(f"uid-{i}") for i in range(1000))
    assert phase_of("uid-1") == phase_of("uid-1")
    assert 0 <= phases[0] < 0.01 and 0.99 < phases[-1] < 1
    quartiles = [sum(1 for p in phases if q / 4 <= p < (q + 1) / 4) for q in range(4)]
    assert all(200 < n < 300 for n in quartiles)
