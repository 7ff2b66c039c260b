"""What the relay reconciler needs from the outside world, passed in through one value.

Built by ``wiring.register`` in production and directly by tests (fake clouds, a private
metrics registry, a clock they move by hand).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from controller.relay.drivers.base import Driver
from controller.relay.drivers.providers import PROVIDERS
from controller.relay.health import HealthReport
from controller.relay.identity import ClusterIdentity
from controller.relay.metrics import RelayMetrics
from controller.settings import RelayArtifactConfig
from controller.toolkit.events import EventRecorder
from wspin.core.clock import Clock, utc_now
from wspin.kube.client import Kube

EXPECTED_CREDENTIALS: Final[dict[str, str]] = {
    name: provider.credentials_secret for name, provider in PROVIDERS.items()
}
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
    drivers: Mapping[str, Driver]
    artifacts: RelayArtifactConfig
    metrics: RelayMetrics
    cluster: ClusterIdentity
    """The value of every VM's cluster tag."""
    health: HealthSource | None = None
    clock: Clock = utc_now
    expected_credentials: Mapping[str, str] = field(
        default_factory=lambda: dict(EXPECTED_CREDENTIALS)
    )
    destroyed: RecentlyDestroyed = field(default_factory=RecentlyDestroyed)
    events: EventRecorder | None = None
    """Where replacement Events go; None: a recorder on ``kube`` with ``clock``."""
