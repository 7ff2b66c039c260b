"""What the relay reconciler needs from the outside world, passed in through one value.

Built by ``wiring.register`` in production and directly by tests (fake clouds, a private
metrics registry, a clock they move by hand).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Protocol

from controller.relay.drivers.base import Clock, ProviderDriver
from controller.relay.health import HealthReport
from controller.relay.launches import Launches
from controller.relay.metrics import RelayMetrics
from controller.settings import RelayArtifactConfig
from wspin.resources import Kube

EXPECTED_CREDENTIALS: Final[dict[str, str]] = {"aws": "aws-relay-irwa", "oci": "oci-credentials"}
"""The Secret each real driver reads; a CR naming another one is a configuration error."""


class HealthSource(Protocol):
    async def scrape(self) -> HealthReport: ...


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class RelayDeps:
    kube: Kube
    namespace: str
    """Where the token Secret, the peers ConfigMap and the credential Secrets live."""
    drivers: Mapping[str, ProviderDriver]
    artifacts: RelayArtifactConfig
    metrics: RelayMetrics
    health: HealthSource | None = None
    clock: Clock = utc_now
    expected_credentials: Mapping[str, str] = field(
        default_factory=lambda: dict(EXPECTED_CREDENTIALS)
    )
    launch_wait_seconds: float = 5.0
    """How long a pass waits for a launch before showing it as in flight and moving on."""
    launches: Launches = field(default_factory=Launches)
