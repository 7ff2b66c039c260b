"""The agent's part of a Workspace status: conditions and fields from what agentd reports
(``agent_view.AgentView``). Pure.

While the Workspace is Active:

- ``AgentHealthy``: ``True/AgentHealthy``; ``False/AgentUnhealthy`` (agentd says so, or answers
  5xx); ``False/AgentDegraded`` (up, but not ready or with no LLM provider connected);
  ``Unknown/HealthCheckFailed`` (no answer); ``Unknown/HealthReportUnreadable`` (an answer that
  is not a health report: see ``agent_view``).
- ``ProviderReady``: ``True/ProvidersReady`` naming the connected providers, or
  ``False/ProvidersNotConnected``.
- ``DiskPressure`` (the volume more than 95 % full) and ``MemoryPressure`` (agentd's own
  verdict, 85 % of the limit): present while true, removed otherwise.
- ``CredentialsApplyPending``: new credentials wait for busy sessions to end; removed when the
  report says nothing is pending, or when the health check failed.
- ``userCredsPresent`` (older agentd builds), ``consecutiveHealthFailures``, ``sessions``,
  ``activeSessions``, the usage fields and ``secretsDelivery`` (what the pod applied of the
  staged credentials: relay staging decides staleness and rotation from it).

A deep status read that fails is informational: what it reported before stays. When the
Workspace leaves Active the agent conditions and fields go (they describe a pod that is gone),
except the usage fields, which stay until the Workspace is Terminated. ``controllerRestartCount``
counts the pods replaced for failing health checks, within the recovery episode ``recovery``
keeps (a suspension, a spec change or a stable stretch resets it).

Writes are kept for what a reader acts on: messages carry no uptime or clock, a session's
context use changing alone writes nothing, and usage is rewritten only when disk or memory
moved by ``USAGE_STEP`` of its total (the API warns at 90 % and 95 %) or when something else
is written anyway. A busy agent therefore costs a status write when its sessions start or
end, not on every read. Fields are absent rather than zero, so an upgrade writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from controller.toolkit.conditions import (
    condition,
    find_condition,
    remove_conditions,
    set_condition,
)
from controller.types import Obj
from controller.workspace.agent.answers import Health, Status, Usage
from controller.workspace.agent.view import RESTART_AFTER, AgentView
from wspin.core.workspace import (
    CONSECUTIVE_HEALTH_FAILURES,
    CONTROLLER_RESTART_COUNT,
    SECRETS_DELIVERY,
)

AGENT_HEALTHY: Final = "AgentHealthy"
PROVIDER_READY: Final = "ProviderReady"
DISK_PRESSURE: Final = "DiskPressure"
MEMORY_PRESSURE: Final = "MemoryPressure"
CREDENTIALS_APPLY_PENDING: Final = "CredentialsApplyPending"
CONDITIONS: Final = (
    AGENT_HEALTHY,
    PROVIDER_READY,
    DISK_PRESSURE,
    MEMORY_PRESSURE,
    CREDENTIALS_APPLY_PENDING,
)
HEALTH_REPORT_UNREADABLE: Final = "HealthReportUnreadable"

POD_FIELDS: Final = ("userCredsPresent", CONSECUTIVE_HEALTH_FAILURES, "sessions", "activeSessions")
"""Fields that describe the running pod's agent, withdrawn when the Workspace leaves Active."""
USAGE_FIELDS: Final[tuple[str, ...]] = (
    "diskUsedBytes",
    "diskTotalBytes",
    "memoryUsedBytes",
    "memoryTotalBytes",
    "cpuUsageMicros",
    "cpuLimitMicrosPerSec",
    "contextUsed",
    "contextTotal",
)
RESTARTS: Final = CONTROLLER_RESTART_COUNT
DELIVERY: Final = SECRETS_DELIVERY

DISK_PRESSURE_RATIO: Final = 0.95
USAGE_STEP: Final = 0.01
"""Fraction of a total that disk or memory use must move by before the status is rewritten
for it alone."""


@dataclass(frozen=True)
class AgentReport:
    """What one pass has to say about the agent, for the status write."""

    view: AgentView | None = None
    """The agent of the Active pod as last observed (None: nothing observed)."""
    restarted: bool = False
    """The pod was just replaced for failing its health checks."""


def _warnings(warnings: tuple[str, ...]) -> str:
    return f"; warnings: {', '.join(warnings)}" if warnings else ""


def _version(version: str) -> str:
    return f"agentd {version}" if version else "agentd"


def healthy_condition(view: AgentView, generation: int) -> Obj | None:
    """``AgentHealthy`` from the latest liveness verdict and deep status (None: not checked)."""
    live = view.liveness
    if live is None:
        return None
    health = live.health or Health(healthy=None)
    if live.verdict == "unreachable":
        message = (
            f"agentd did not answer its health check ({live.detail}), {view.failures} time(s) "
            f"in a row; the pod is replaced after {RESTART_AFTER}"
        )
        return condition(AGENT_HEALTHY, "Unknown", "HealthCheckFailed", message, generation)
    if live.verdict == "unhealthy":
        message = (
            f"{_version(health.version)} reports itself unhealthy ({live.detail}), "
            f"{view.failures} time(s) in a row; the pod is replaced after {RESTART_AFTER}"
            + _warnings(health.warnings)
        )
        return condition(AGENT_HEALTHY, "False", "AgentUnhealthy", message, generation)
    if live.verdict == "unreadable":
        message = (
            f"{live.detail}: agentd's health cannot be judged, and the pod is not restarted "
            "for it (an agentd release whose report this controller does not read?)"
        )
        return condition(AGENT_HEALTHY, "Unknown", HEALTH_REPORT_UNREADABLE, message, generation)
    status = view.status
    if status is not None and not (status.ready and status.connected):
        why = "is not ready" if not status.ready else "has no LLM provider connected"
        message = f"{_version(status.version or health.version)} is up but {why}"
        return condition(
            AGENT_HEALTHY,
            "False",
            "AgentDegraded",
            message + _warnings(status.warnings or health.warnings),
            generation,
        )
    message = f"{_version(health.version)} is healthy"
    if status is not None:
        message += f"; connected: {', '.join(status.connected)}"
    return condition(
        AGENT_HEALTHY, "True", "AgentHealthy", message + _warnings(health.warnings), generation
    )


def _percent(usage: Usage) -> int:
    return int(usage.used * 100 // usage.total) if usage.total else 0


def status_conditions(status: Status, generation: int) -> tuple[list[Obj], list[str]]:
    """``ProviderReady`` and the pressure conditions from a deep status: (set, remove)."""
    found: list[Obj] = []
    gone: list[str] = []
    if status.ready and status.connected:
        found.append(
            condition(
                PROVIDER_READY,
                "True",
                "ProvidersReady",
                f"connected: {', '.join(status.connected)}",
                generation,
            )
        )
    else:
        why = "agentd is not ready" if not status.ready else "no LLM provider is connected"
        found.append(
            condition(
                PROVIDER_READY,
                "False",
                "ProvidersNotConnected",
                f"{why} ({status.providers_configured} configured)",
                generation,
            )
        )
    disk = status.disk
    if disk is not None and disk.total and disk.used > disk.total * DISK_PRESSURE_RATIO:
        message = f"the workspace volume is {_percent(disk)}% full"
        found.append(condition(DISK_PRESSURE, "True", DISK_PRESSURE, message, generation))
    else:
        gone.append(DISK_PRESSURE)
    if status.memory_pressure:
        memory = status.memory
        share = f" ({_percent(memory)}% of its limit)" if memory and memory.total else ""
        message = f"agentd reports memory pressure{share}"
        found.append(condition(MEMORY_PRESSURE, "True", MEMORY_PRESSURE, message, generation))
    else:
        gone.append(MEMORY_PRESSURE)
    return found, gone


def _pending_condition(health: Health | None, generation: int) -> Obj | None:
    pending = health.pending_apply if health is not None else None
    if pending is None:
        return None
    message = f"new credentials wait for {pending.busy_sessions} busy session(s) to end"
    if pending.reason:
        message += f" ({pending.reason})"
    return condition(
        CREDENTIALS_APPLY_PENDING, "True", "CredentialsApplyDeferred", message, generation
    )


def usage_fields(status: Status) -> Obj:
    """The usage fields a deep status gives (absent ones left out)."""
    fields: Obj = {}
    for prefix, usage in (("disk", status.disk), ("memory", status.memory)):
        if usage is not None:
            fields[f"{prefix}UsedBytes"], fields[f"{prefix}TotalBytes"] = usage.used, usage.total
    if status.cpu_usage_micros is not None:
        fields["cpuUsageMicros"] = status.cpu_usage_micros
    if status.cpu_limit_micros_per_sec is not None:
        fields["cpuLimitMicrosPerSec"] = status.cpu_limit_micros_per_sec
    if status.context is not None:
        fields["contextUsed"], fields["contextTotal"] = status.context.used, status.context.total
    return fields


def _moved(old: Obj, new: Obj) -> bool:
    """Whether usage changed enough to be written for itself."""
    if set(old) != set(new):
        return True
    for key in ("diskTotalBytes", "memoryTotalBytes", "cpuLimitMicrosPerSec", "contextTotal"):
        if old.get(key) != new.get(key):
            return True
    for prefix in ("disk", "memory"):
        total = new.get(f"{prefix}TotalBytes")
        if not isinstance(total, int) or not total:
            continue
        before, after = old.get(f"{prefix}UsedBytes"), new.get(f"{prefix}UsedBytes")
        if not isinstance(before, int) or not isinstance(after, int):
            return before != after
        if abs(after - before) >= total * USAGE_STEP:
            return True
    return False


def _sessions(status: Status) -> list[Obj]:
    return [
        {"id": s.id, "title": s.title, "status": s.status, "contextUsed": s.context_used}
        for s in status.sessions
    ]


def _without_context(sessions: object) -> list[Obj]:
    if not isinstance(sessions, list):
        return []
    return [
        {k: v for k, v in s.items() if k != "contextUsed"} for s in sessions if isinstance(s, dict)
    ]


def _set_or_drop(status: Obj, key: str, value: object) -> None:
    """Absent rather than empty: None, 0 and [] remove the field (False is a value)."""
    if value is None or value == [] or (value == 0 and not isinstance(value, bool)):
        status.pop(key, None)
    else:
        status[key] = value


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _mirrored(old: Obj, view: AgentView) -> Obj | None:
    """``secretsDelivery`` with what the latest health report says the pod applied (None:
    no report to go by; the status keeps what it last said)."""
    live = view.liveness
    if live is None or live.health is None or live.verdict not in ("ok", "unhealthy"):
        return None
    delivery = live.health.delivery
    mirrored = {
        **(old.get(DELIVERY) or {}),
        "relayRevision": delivery.relay_revision,
        "degradedReason": delivery.degraded_reason,
    }
    if delivery.spawned_rev:
        mirrored["spawnedRev"] = delivery.spawned_rev
    return mirrored


def with_delivery(ws: Obj, report: AgentReport | None) -> Obj:
    """``ws`` as relay staging should see it: ``status.secretsDelivery`` as the agent reports
    it now, ahead of the status write that records it."""
    status = ws.get("status") or {}
    mirrored = _mirrored(status, report.view) if report and report.view else None
    if mirrored is None or mirrored == status.get(DELIVERY):
        return ws
    return {**ws, "status": {**status, DELIVERY: mirrored}}


def _active(old: Obj, new: Obj, view: AgentView, generation: int, now: str) -> None:
    conditions = list(new.get("conditions") or [])
    gone: list[str] = []
    found: list[Obj] = []
    healthy = healthy_condition(view, generation)
    if healthy is not None:
        found.append(healthy)
    live = view.liveness
    health = live.health if live is not None and live.verdict == "ok" else None
    if live is not None:
        pending = _pending_condition(health, generation)
        if pending is not None:
            found.append(pending)
        else:
            gone.append(CREDENTIALS_APPLY_PENDING)
        _set_or_drop(new, "userCredsPresent", health.user_creds_present if health else None)
        mirrored = _mirrored(old, view)
        if mirrored is not None:
            new[DELIVERY] = mirrored
    _set_or_drop(new, CONSECUTIVE_HEALTH_FAILURES, view.failures)
    status = view.status
    if status is not None:
        more, less = status_conditions(status, generation)
        found += more
        gone += less
        _set_or_drop(new, "sessions", _sessions(status))
        _set_or_drop(new, "activeSessions", status.sessions_active)
        for key in USAGE_FIELDS:
            new.pop(key, None)
        new.update(usage_fields(status))
    for item in found:
        conditions = set_condition(conditions, item, now)
    new["conditions"] = remove_conditions(conditions, gone)


def _settle_churn(old: Obj, new: Obj) -> None:
    """Keep the usage and a session's context use as written unless something a reader acts
    on changed too: then everything is written fresh in the same write."""
    old_usage = {k: old[k] for k in USAGE_FIELDS if k in old}
    new_usage = {k: new[k] for k in USAGE_FIELDS if k in new}
    calm = not _moved(old_usage, new_usage)
    same_sessions = _without_context(old.get("sessions")) == _without_context(new.get("sessions"))
    rest_old = {k: v for k, v in old.items() if k not in USAGE_FIELDS and k != "sessions"}
    rest_new = {k: v for k, v in new.items() if k not in USAGE_FIELDS and k != "sessions"}
    if rest_old != rest_new or not same_sessions or not calm:
        return
    for key in USAGE_FIELDS:
        new.pop(key, None)
    new.update(old_usage)
    if "sessions" in old:
        new["sessions"] = old["sessions"]


def apply(
    old: Obj, new: Obj, report: AgentReport | None, phase: str, generation: int, now: str
) -> Obj:
    """``new`` (the status a pass is about to write over ``old``) with the agent's part."""
    result = dict(new)
    # The recovery record owns the episode (it resets the count when the Workspace is
    # stopped, its spec changes or it stayed Active for the stability window); a health
    # restart adds one.
    restarts = _count(new.get(RESTARTS)) + (1 if report is not None and report.restarted else 0)
    if restarts or RESTARTS in new:  # a reset reads 0; a Workspace never restarted has none
        result[RESTARTS] = restarts
    if phase == "Active" and report is not None and report.view is not None:
        _active(old, result, report.view, generation, now)
        _settle_churn(old, result)
        return result
    if phase != "Active":
        for key in POD_FIELDS:
            result.pop(key, None)
        if phase == "Terminated":
            for key in USAGE_FIELDS:
                result.pop(key, None)
        conditions = result.get("conditions")
        if isinstance(conditions, list) and any(find_condition(conditions, t) for t in CONDITIONS):
            result["conditions"] = remove_conditions(conditions, CONDITIONS)
    return result


def changes_status(status: Obj, view: AgentView, generation: int, now: str) -> bool:
    """Whether writing what ``view`` says into an Active Workspace's ``status`` would change
    it: the agent scheduler asks for a reconcile only then."""
    return apply(status, status, AgentReport(view), "Active", generation, now) != status
