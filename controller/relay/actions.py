"""What a fleet pass observed and what it decided: the inputs and the output of ``plan_fleet``.

Plain values, no behaviour: the planner (``plan``, ``replacement``) fills a ``FleetPlan``,
the executor (``execute``) carries it out, and the tests render it as a golden file.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Mapping, Sequence
from dataclasses import dataclass, field

from controller.relay.drivers.base import CloudInstance
from controller.relay.spec import Instance, ProviderSpec


@dataclass(frozen=True)
class Launch:
    """Launch a VM for the slot (the executor ensures its token is stored first)."""

    slot: ProviderSpec
    attempts: int = 0
    """Configuration errors so far (carried into the failure placeholder)."""
    launch_failures: int = 0
    """Retryable failures so far (the backoff exponent)."""
    replaces: str = ""
    """The VM this one replaces while that one keeps running (a surge); "" for the slot's
    own VM."""
    token_key: str = ""
    """Where the VM's token lives in the token Secret; "" means the provider's name."""

    @property
    def key(self) -> str:
        return self.token_key or self.slot.provider


@dataclass(frozen=True)
class Destroy:
    provider: str
    instance_id: str
    region: str
    reason: str
    """Why, for the log line and the rotation metric: ``provider removed``, ``duplicate``,
    ``gone``, ``unhealthy``, ``manual``."""
    keep: Instance | None = None
    """The status entry to keep when the destroy fails (retried next pass, never leaked)."""
    blocks: str = ""
    """The provider whose launch waits for this destroy (a replacement in place)."""
    promotes: str = ""
    """The replacement VM that takes the slot over once this destroy succeeded; when it
    fails, that VM goes back to being the replacement."""
    token_key: str = ""
    """The key of this VM's token: it goes with the VM, and stays while the VM does."""


@dataclass(frozen=True)
class Observation:
    """What one pass saw: the VMs listed under the CR's UID, and what it could not see."""

    vms: Sequence[CloudInstance] = ()
    unlisted: Collection[str] = ()
    """Providers whose listing failed: nothing is decided about their VMs."""
    described: Mapping[str, CloudInstance | None] = field(default_factory=dict)
    """Status VMs the listing left out, asked of the cloud one by one (None: not found)."""
    unknown: Collection[str] = ()
    """Status VMs whose describe failed: nothing is decided about them."""
    destroyed: Container[str] = ()
    """VMs this controller destroyed lately (a lagging listing may still show them)."""
    drivers: Collection[str] = ()
    """Providers this controller has a driver for."""


@dataclass(frozen=True)
class Replacing:
    """A replacement of an unhealthy VM this pass starts or completes (for its Event)."""

    provider: str
    old: str
    """The unhealthy VM."""
    unhealthy_seconds: float = 0.0
    in_place: bool = False
    """Destroyed before its replacement launches (``maxSurge`` 0)."""
    new: str = ""
    """The VM that took over (a completed replacement)."""


@dataclass
class FleetPlan:
    actions: list[Launch | Destroy] = field(default_factory=list)
    instances: list[Instance] = field(default_factory=list)
    """The status entries, in spec order (a slot's VM, then its replacement), then kept
    entries of removed providers."""
    drop_tokens: set[str] = field(default_factory=set)
    """Token keys whose VM is gone, replaced or rotated (kept while its destroy fails)."""
    rotated: bool = False
    waits: list[float] = field(default_factory=list)
    """Seconds until a backoff or a replacement timeout ends."""
    provisioned: list[tuple[str, float]] = field(default_factory=list)
    """(provider, seconds from launch to running with an IP) for VMs that just got there."""
    adopted: list[str] = field(default_factory=list)
    died: dict[str, Instance] = field(default_factory=dict)
    """provider → the backoff placeholder of a slot whose new VM died before serving."""
    replaced: list[str] = field(default_factory=list)
    """Providers whose VM disappeared on its own (counted as a ``gone`` rotation)."""
    started: list[Replacing] = field(default_factory=list)
    """Replacements of unhealthy VMs this pass starts."""
    completed: list[Replacing] = field(default_factory=list)
    """Replacements this pass completes (the old VM retired, or found gone)."""
    held: list[str] = field(default_factory=list)
    """Why a due replacement or retirement waits (surge in use, the healthy minimum)."""

    @property
    def launches(self) -> list[Launch]:
        return [a for a in self.actions if isinstance(a, Launch)]

    @property
    def destroys(self) -> list[Destroy]:
        return [a for a in self.actions if isinstance(a, Destroy)]
