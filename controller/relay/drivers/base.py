"""The contract every cloud driver implements: five calls, the VM tags and the typed errors.

``launch`` sends the launch and returns the instance id at once (it never waits for the VM to
run); the same client token returns the same VM, so a launch retried after a crash never makes
a second one. ``describe``, ``destroy`` and ``list`` report what the cloud holds; the
reconciler polls them on its own schedule, so no driver has a wait loop.

Tags are how a VM names its owner and its cluster: they let the reconciler find a VM whose
launch status never recorded, let deletion sweep leftovers, and let the orphan detector find
VMs whose InferenceRelay is gone, in this cluster only. A VM without ``managed-by`` is never
listed, so no code path can touch it.

The VM token never rides in the user data (anyone allowed to describe the instance reads
that): ``store_token`` puts it in the cloud's secret store before the launch and answers with
the command the VM runs at boot, with its own role, to read it back. The VM carries the
reference in its ``TAG_TOKEN_REF`` tag, so ``destroy`` (also the orphan sweep's) deletes the
stored token with the VM.

Errors are classes, never strings: a driver maps its cloud's error codes once, and the
reconciler decides by class (a configuration error counts towards the breaker, the others
back off and retry).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal, Protocol

from wspin.core.errors import WspinError

TAG_MANAGED_BY: Final = "managed-by"
MANAGED_BY_VALUE: Final = "llmsafespaces-relay"
TAG_OWNER_UID: Final = "inferencerelay-uid"
TAG_PROVIDER: Final = "inferencerelay-provider"
TAG_CLUSTER: Final = "llmsafespaces-cluster"
TAG_LAUNCH: Final = "inferencerelay-launch"
"""The launch's client token, so a VM whose launch result was lost is recognised as that
launch's (a one-way hash of the CR, the slot and the VM token: it reveals no secret)."""
TAG_TOKEN_REF: Final = "inferencerelay-token-ref"  # noqa: S105 (a tag name)
"""Where the VM's token is stored (parameter name, secret OCID): ``destroy`` deletes it."""

VMState = Literal["pending", "running", "stopping", "stopped", "terminated"]
LIVE_STATES: Final[frozenset[str]] = frozenset({"pending", "running"})


def vm_tags(*, cluster: str, owner_uid: str = "", provider: str = "") -> dict[str, str]:
    """The tags a relay VM carries: managed-by and the cluster always, owner and provider
    when known (orphan tests seed VMs without them)."""
    tags = {TAG_MANAGED_BY: MANAGED_BY_VALUE}
    if cluster:
        tags[TAG_CLUSTER] = cluster
    if owner_uid:
        tags[TAG_OWNER_UID] = owner_uid
    if provider:
        tags[TAG_PROVIDER] = provider
    return tags


def matches(tags: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    return all(tags.get(key) == value for key, value in wanted.items())


@dataclass(frozen=True)
class LaunchRequest:
    """One VM to launch; ``cloud_init`` is already base64 (both clouds take it that way)."""

    name: str
    region: str
    shape: str
    cloud_init: str
    tags: Mapping[str, str]
    """Every tag the VM gets (``vm_tags`` plus the launch tag)."""
    client_token: str
    """Idempotency key: the same key returns the same VM, not a second one."""
    arch: str = ""
    """``amd64`` or ``arm64``: picks the VM image so it matches the binary cloud-init fetches."""


@dataclass(frozen=True)
class TokenSlot:
    """Which launch a stored token belongs to: its name derives from these, so storing the
    same launch's token again overwrites it (a launch retried after a crash)."""

    owner_uid: str
    """The InferenceRelay's uid."""
    launch: str
    """The launch's client token (one per VM token)."""
    region: str
    tags: Mapping[str, str]
    """The relay tags (``vm_tags`` plus the launch tag) the stored secret carries too."""


@dataclass(frozen=True)
class TokenRef:
    """Where a stored token is: ``reference`` goes in the VM's ``TAG_TOKEN_REF`` tag;
    ``fetch`` is the POSIX sh command (its words already quoted) that prints the token on
    stdout when run on the VM."""

    reference: str
    fetch: str


@dataclass(frozen=True)
class CloudInstance:
    """One managed VM as the cloud reports it; owner, provider and cluster come from its tags."""

    instance_id: str
    region: str
    state: VMState
    public_ip: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)
    launched_at: datetime | None = None

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    @property
    def owner_uid(self) -> str:
        return self.tags.get(TAG_OWNER_UID, "")

    @property
    def provider(self) -> str:
        return self.tags.get(TAG_PROVIDER, "")

    @property
    def cluster(self) -> str:
        return self.tags.get(TAG_CLUSTER, "")

    @property
    def launch_token(self) -> str:
        return self.tags.get(TAG_LAUNCH, "")


class Driver(Protocol):
    """A cloud that runs relay VMs. Every method raises only ``DriverError`` subclasses."""

    async def launch(self, request: LaunchRequest) -> str:
        """Send the launch (idempotent by ``client_token``) and return the instance id."""
        ...

    async def store_token(self, slot: TokenSlot, token: str) -> TokenRef:
        """Store ``token`` in the cloud's secret store (overwriting the same slot's) and
        return where the VM reads it."""
        ...

    async def describe(self, instance_id: str, region: str) -> CloudInstance:
        """The VM's current state; ``InstanceNotFound`` when the cloud does not know it."""
        ...

    async def destroy(self, instance_id: str, region: str) -> None:
        """Terminate the VM and delete the token its ``TAG_TOKEN_REF`` names; a VM or a token
        that is already gone is not an error."""
        ...

    async def list(self, tags: Mapping[str, str], regions: Sequence[str]) -> list[CloudInstance]:
        """Every managed VM in ``regions`` whose tags include ``tags``, terminated ones too
        while the cloud still lists them."""
        ...


class DriverError(WspinError):
    """A cloud call failed (base class; drivers raise one of the subclasses)."""


class InstanceNotFound(DriverError):
    """The cloud does not know the instance (never launched, or terminated long ago)."""


class Throttled(DriverError):
    """The cloud rate-limited the call: retry later."""


class QuotaExceeded(DriverError):
    """Out of capacity or over an instance quota: retry later."""


class ConfigurationError(DriverError):
    """Bad credentials, image, shape or parameters: retrying cannot help until the spec or the
    credentials change."""


class TransientCloudError(DriverError):
    """A network failure or a server-side error: retry later."""


RETRYABLE: Final = (Throttled, QuotaExceeded, TransientCloudError)


def truncate(text: str, limit: int = 200) -> str:
    """Cloud error bodies can be long; status fields and logs keep the first ``limit`` chars."""
    return text if len(text) <= limit else text[:limit] + "..."
