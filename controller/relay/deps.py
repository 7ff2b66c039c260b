"""What the relay reconciler needs from the outside world, passed in through one value.

Built by ``wiring.register`` in production and directly by tests (fake clouds, a private
metrics registry, a clock they move by hand).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from controller.relay.drivers.base import ProviderDriver
from controller.relay.health import HealthReport
from controller.relay.launches import Launches
from controller.relay.metrics import RelayMetrics
from controller.settings import RelayArtifactConfig
from controller.toolkit.clock import Clock, utc_now
from wspin.resources import Kube

EXPECTED_CREDENTIALS: Final[dict[str, str]] = {"aws": "aws-relay-irwa", "oci": "oci-credentials"}
"""The Secret each real driver reads; a CR naming another one is a configuration error."""


class HealthSource(Protocol):
    async def scrape(self) -> HealthReport: ...


class RecentlyDestroyed:
    """IDs of the VMs this controller destroyed lately, newest ``limit`` kept.

    A cloud listing can show a destroyed VM as running for a while (OCI's lags behind a
    terminate); adoption consults this so it never takes such a VM back into a slot.
    """

    def __init__(self, limit: int = 1024) -> None:
        self.limit = limit
        self._ids: OrderedDict[str, None] = OrderedDict()

    def add(self, instance_id: str) -> None:
        self._ids[instance_id] = None
        self._ids.move_to_end(instance_id)
        while len(self._ids) > self.limit:
            self._ids.popitem(last=False)

    def __contains__(self, instance_id: object) -> bool:
        return instance_id in self._ids


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
    destroyed: RecentlyDestroyed = field(default_factory=RecentlyDestroyed)
