"""What the manager needs to know to run: its ports, concurrency, shutdown grace and Lease.

The manager's own small value, built from the process settings by ``controller.setup``, so
the runtime depends on nothing the application configures beyond these fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LeaderElection:
    """The Lease that makes one replica the reconciling one."""

    enabled: bool = False
    """Off: this process always leads (a single replica)."""
    namespace: str = "llmsafespaces"
    name: str = "wspin-controller"
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclass(frozen=True)
class ManagerOptions:
    health_port: int = 8081
    """``/healthz`` and ``/readyz`` (0 = any free port)."""
    metrics_port: int = 8080
    """Prometheus ``/metrics`` (0 = any free port)."""
    bind_host: str | None = None
    """Address both side servers bind; None = every interface."""
    max_concurrent_reconciles: int = 4
    """Workers per controller."""
    graceful_shutdown_timeout: float = 30.0
    """Seconds in-flight reconciles get to finish after ``stop()``."""
    leader_election: LeaderElection = field(default_factory=LeaderElection)
