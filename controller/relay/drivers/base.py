"""The ProviderDriver contract every cloud implements, the VM tag contract and error classes.

Four calls and nothing more: rotation is always destroy plus provision, never an in-place
change. Tags are how a VM names its owner: they let the reconciler adopt a VM whose creation
was never recorded in status, let deletion sweep leftovers, and let the orphan detector find
VMs whose InferenceRelay is gone. A VM without ``managed-by`` is never listed, so no code path
can touch it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal, Protocol

from wspin.errors import WspinError

TAG_MANAGED_BY: Final = "managed-by"
MANAGED_BY_VALUE: Final = "llmsafespaces-relay"
TAG_OWNER_UID: Final = "inferencerelay-uid"
TAG_PROVIDER: Final = "inferencerelay-provider"

VMState = Literal["pending", "running", "stopping", "stopped", "terminated", "not-found"]
LIVE_STATES: Final[frozenset[str]] = frozenset({"pending", "running"})


def vm_tags(owner_uid: str, provider: str) -> dict[str, str]:
    """The tags every relay VM carries: managed-by always, owner and provider when known."""
    tags = {TAG_MANAGED_BY: MANAGED_BY_VALUE}
    if owner_uid:
        tags[TAG_OWNER_UID] = owner_uid
    if provider:
        tags[TAG_PROVIDER] = provider
    return tags


def is_managed(tags: Mapping[str, str]) -> bool:
    return tags.get(TAG_MANAGED_BY) == MANAGED_BY_VALUE


@dataclass(frozen=True)
class ProvisionRequest:
    """One VM to launch; ``cloud_init`` is already base64 (both clouds take it that way)."""

    name: str
    region: str
    shape: str
    cloud_init: str
    owner_uid: str
    provider: str
    client_token: str = ""
    """Idempotency key for the launch call: the same key returns the same VM, not a second one."""
    arch: str = ""
    """``amd64`` or ``arm64``: picks the VM image so it matches the binary cloud-init fetches."""


@dataclass(frozen=True)
class ProvisionResult:
    instance_id: str
    public_ip: str


@dataclass(frozen=True)
class InstanceStatus:
    instance_id: str
    state: VMState
    public_ip: str = ""


@dataclass(frozen=True)
class CloudInstance:
    """One managed VM as a listing reports it; owner and provider come back from its tags."""

    instance_id: str
    region: str
    state: VMState
    public_ip: str = ""
    owner_uid: str = ""
    provider: str = ""
    launched_at: datetime | None = None

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES


class ProviderDriver(Protocol):
    """A cloud that runs relay VMs. Every method may raise a ``DriverError``."""

    async def provision(self, request: ProvisionRequest) -> ProvisionResult:
        """Launch a tagged VM and return once it runs with a public IP."""
        ...

    async def destroy(self, instance_id: str, region: str) -> None:
        """Terminate the VM; terminating one that is already gone is not an error."""
        ...

    async def get_status(self, instance_id: str, region: str) -> InstanceStatus: ...

    async def list_instances(self, region: str) -> list[CloudInstance]:
        """Every managed-by-tagged VM in ``region``, terminated ones included while listed."""
        ...


class DriverError(WspinError):
    """A cloud call failed in a way the reconciler does not class (retried with backoff)."""


class ConfigurationError(DriverError):
    """Bad credentials, image, shape or parameters: retrying cannot help until the spec changes."""


class CapacityError(DriverError):
    """Out of capacity, over a quota or rate limited: retry later."""


class ProvisionTimeout(DriverError):
    """The VM was launched but did not run with a public IP before the deadline."""


def truncate(text: str, limit: int = 200) -> str:
    """Cloud error bodies can be long; status fields and logs keep the first ``limit`` chars."""
    return text if len(text) <= limit else text[:limit] + "..."
