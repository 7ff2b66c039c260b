"""The kubelet probes of the workspace container and the agentd sidecar (pure data).

agentd serves ``/v1/healthz`` (open) and ``/v1/readyz`` (bearer-gated by the workspace's
admin token once that exists) on its admin port. In sidecar mode the admin port belongs to
the sidecar (the pod shares one network namespace), so the workspace container's liveness
moves to a TCP check of opencode's own port: pointing it at the sidecar's healthz would
restart opencode whenever the sidecar wedges, which is backwards.
"""

from __future__ import annotations

from typing import Final

from controller.types import Obj

OPENCODE_PORT: Final = 4096
"""opencode serve (spawned by the supervisor)."""
AGENTD_PORT: Final = 4097
"""agentd's user-facing HTTP API."""
AGENTD_ADMIN_PORT: Final = 4098
"""agentd's admin API: healthz, readyz, statusz."""


def _http(path: str, token: str = "") -> Obj:
    action: Obj = {"path": path, "port": AGENTD_ADMIN_PORT}
    if token:
        action["httpHeaders"] = [{"name": "Authorization", "value": f"Bearer {token}"}]
    return {"httpGet": action}


def _timing(initial: int, period: int, timeout: int, failures: int) -> Obj:
    return {
        "initialDelaySeconds": initial,
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }


STARTUP_BUDGET: Final = 180
"""Seconds the workspace container may take to serve: a cold pull of the agentd and opencode
image volumes on a fresh node, the inits and opencode's start fit in 3 minutes."""


def workspace_startup(token: str) -> Obj:
    """1 s probes during boot, ``STARTUP_BUDGET`` seconds of failures allowed; readiness
    and liveness wait until it passes."""
    return {**_http("/v1/readyz", token), **_timing(1, 1, 2, STARTUP_BUDGET)}


def workspace_readiness(token: str) -> Obj:
    """Ready at most 2 s after agentd's first 200; 60 s of failures before unready."""
    return {**_http("/v1/readyz", token), **_timing(2, 2, 2, 30)}


def workspace_liveness() -> Obj:
    """Single-container mode: agentd's own healthz, generous (3 minutes of failures)."""
    return {**_http("/v1/healthz"), **_timing(15, 30, 5, 6)}


def workspace_liveness_sidecar_mode() -> Obj:
    """Sidecar mode: is the supervised opencode listening (kernel-level TCP check)."""
    return {"tcpSocket": {"port": OPENCODE_PORT}, **_timing(15, 10, 10, 8)}


def sidecar_startup() -> Obj:
    """Gates the workspace container: opencode starts only once the sidecar serves, and it
    serves only after stamping the boot agent config. 3 minutes: a cold pull counts."""
    return {**_http("/v1/healthz"), **_timing(2, 5, 3, 36)}


def sidecar_liveness() -> Obj:
    """A wedged sidecar restarts the sidecar only; the workspace container keeps running."""
    return {**_http("/v1/healthz"), **_timing(15, 10, 10, 8)}


def sidecar_readiness(token: str) -> Obj:
    return {**_http("/v1/readyz", token), **_timing(2, 5, 5, 12)}
