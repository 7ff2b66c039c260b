"""What agentd says about itself, read from its two admin endpoints into typed values. Pure.

- ``GET /v1/healthz`` (open): liveness (``healthy``), its version and warnings, what the pod
  applied of the staged credentials (``relay``, ``spawnEnv``), credentials waiting for busy
  sessions to end (``pendingApply``) and, on older builds, ``userCredsPresent``.
- ``GET /v1/statusz`` (the admin bearer): readiness, the LLM providers it is connected to, its
  sessions and what the pod uses (disk, memory, CPU, context window).

The pod runs the tenant's code, so every answer is hostile input: the body is read under a
size cap by the caller, every field is type-checked (a wrong type reads as absent, never as a
crash), every string is cut to ``TEXT_MAX`` and every list to its own bound before any of it
can reach a Workspace's status. A body that is not a JSON object is ``Unreadable``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Final, Literal

from controller.types import Obj

MAX_HEALTH_BODY: Final = 64 * 1024
"""A health report is a few hundred bytes; more is not a health report."""
MAX_STATUS_BODY: Final = 512 * 1024
"""Deep status lists sessions; agentd caps active ones at 20, a few hundred idle ones with
titles still fit."""
TEXT_MAX: Final = 256
"""Longest string taken from an answer (a revision, a title, a warning)."""
MAX_SESSIONS: Final = 50
"""Sessions mirrored into status (busy ones first); the count is reported whole."""
MAX_WARNINGS: Final = 8
MAX_PROVIDERS: Final = 32

SessionState = Literal["idle", "busy"]


class Unreadable(ValueError):
    """The answer is not a report this controller can read (the message says why, in a few
    words, and never quotes the body)."""


@dataclass(frozen=True)
class Delivery:
    """What the running pod applied of the credentials staged for it (``secretsDelivery``)."""

    relay_revision: str = ""
    degraded_reason: str = ""
    spawned_rev: str = ""


@dataclass(frozen=True)
class PendingApply:
    """New credentials agentd holds back until its busy sessions end."""

    reason: str
    busy_sessions: int


@dataclass(frozen=True)
class Health:
    """A ``/v1/healthz`` answer."""

    healthy: bool | None
    """None: the answer did not say (``Unreadable`` for liveness)."""
    version: str = ""
    warnings: tuple[str, ...] = ()
    user_creds_present: bool | None = None
    delivery: Delivery = field(default_factory=Delivery)
    pending_apply: PendingApply | None = None


@dataclass(frozen=True)
class Session:
    id: str
    title: str
    status: SessionState
    context_used: int


@dataclass(frozen=True)
class Usage:
    used: int
    total: int


@dataclass(frozen=True)
class Status:
    """A ``/v1/statusz`` answer."""

    healthy: bool
    ready: bool
    connected: tuple[str, ...] = ()
    providers_configured: int = 0
    sessions: tuple[Session, ...] = ()
    sessions_active: int = 0
    version: str = ""
    warnings: tuple[str, ...] = ()
    disk: Usage | None = None
    memory: Usage | None = None
    cpu_usage_micros: int | None = None
    cpu_limit_micros_per_sec: int | None = None
    context: Usage | None = None
    memory_pressure: bool = False

    def busy(self) -> dict[str, int]:
        """Busy session id → context used: what a session drain watches for progress."""
        return {s.id: s.context_used for s in self.sessions if s.status == "busy"}


def _object(body: bytes, what: str) -> Obj:
    try:
        decoded = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise Unreadable(f"{what} answer is not JSON") from None
    if not isinstance(decoded, dict):
        raise Unreadable(f"{what} answer is not a JSON object")
    return decoded


def _text(value: object) -> str:
    return value[:TEXT_MAX] if isinstance(value, str) else ""


def _count(value: object) -> int | None:
    """A non-negative whole number (JSON numbers may come as floats), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value != value or value < 0 or value > 2**63 - 1:  # NaN, negative, past int64
        return None
    return int(value)


def _bool(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _dict(value: object) -> Obj:
    return value if isinstance(value, dict) else {}


def _texts(value: object, limit: int) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(_text(item) for item in value[:limit] if isinstance(item, str) and item)


def _usage(value: object, used_key: str, total_key: str) -> Usage | None:
    part = _dict(value)
    used, total = _count(part.get(used_key)), _count(part.get(total_key))
    if used is None or total is None:
        return None
    return Usage(used, total)


def delivery_of(report: Obj) -> Delivery:
    """The relay slice's revision and degrade code (the relay's code wins; a healthy relay
    slice does not erase another degrade), and the env revision agentd spawned with."""
    relay = _dict(report.get("relay"))
    spawn = _dict(report.get("spawnEnv"))
    revision = _text(relay.get("appliedRevision")) or _text(report.get("relayRevision"))
    reason = _text(relay.get("degradedReason")) or _text(report.get("degradedReason"))
    if not reason and spawn.get("degraded") is True:
        reason = _text(spawn.get("reason"))
    return Delivery(revision, reason, _text(spawn.get("spawnedRev")))


def parse_health(body: bytes) -> Health:
    """A healthz body; ``Unreadable`` when it is not a JSON object."""
    report = _object(body, "healthz")
    pending = report.get("pendingApply")
    apply = None
    if isinstance(pending, dict):
        busy = pending.get("busySessions")
        count = len(busy) if isinstance(busy, list) else _count(busy)
        apply = PendingApply(_text(pending.get("reason")), count or 0)
    return Health(
        healthy=_bool(report.get("healthy")),
        version=_text(report.get("version")),
        warnings=_texts(report.get("warnings"), MAX_WARNINGS),
        user_creds_present=_bool(report.get("userCredsPresent")),
        delivery=delivery_of(report),
        pending_apply=apply,
    )


def _sessions(value: object) -> tuple[Session, ...]:
    if not isinstance(value, list):
        return ()
    found: list[Session] = []
    for item in value[: MAX_SESSIONS * 20]:  # a bounded scan of a hostile list
        if not isinstance(item, dict):
            continue
        ident = _text(item.get("id"))
        if not ident:
            continue
        state: SessionState = "busy" if item.get("status") == "busy" else "idle"
        found.append(
            Session(ident, _text(item.get("title")), state, _count(item.get("contextUsed")) or 0)
        )
    # Busy sessions first: they are what a drain waits for and what a reader looks for.
    found.sort(key=lambda s: s.status != "busy")
    return tuple(found[:MAX_SESSIONS])


def parse_status(body: bytes) -> Status:
    """A statusz body; ``Unreadable`` when it is not a JSON object or does not say whether
    agentd is healthy."""
    report = _object(body, "statusz")
    healthy = _bool(report.get("healthy"))
    if healthy is None:
        raise Unreadable("statusz answer has no boolean 'healthy'")
    cpu = _dict(report.get("cpu"))
    sessions = _sessions(report.get("sessions"))
    active = _count(report.get("sessions_active"))
    return Status(
        healthy=healthy,
        ready=report.get("ready") is True,
        connected=_texts(report.get("connected"), MAX_PROVIDERS),
        providers_configured=_count(report.get("providers_configured")) or 0,
        sessions=sessions,
        sessions_active=active if active is not None else sum(s.status == "busy" for s in sessions),
        version=_text(report.get("agent_version")),
        warnings=_texts(report.get("warnings"), MAX_WARNINGS),
        disk=_usage(report.get("disk"), "used_bytes", "total_bytes"),
        memory=_usage(report.get("memory"), "used_bytes", "total_bytes"),
        cpu_usage_micros=_count(cpu.get("usage_micros")),
        cpu_limit_micros_per_sec=_count(cpu.get("limit_micros_per_sec")),
        context=_usage(report.get("context"), "used_tokens", "total_tokens"),
        memory_pressure=report.get("memory_pressure") is True,
    )
