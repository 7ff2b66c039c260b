"""The InferenceRelay wire format and its parsed, defaulted spec. Pure: no I/O.

The CR stays a plain dict (as the API server sent it); ``parse_spec`` reads the fields the
controller acts on into frozen values and applies the schema's defaults once, so the rest
of the code never handles a missing key. A spec the controller cannot act on (two entries
for one provider) is an error naming the field, not a silent guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Literal, TypedDict, get_args

from wspin.core.errors import WspinError

FINALIZER: Final = "inferencerelay.llmsafespaces.dev/finalizer"
ROTATE_ANNOTATION: Final = "relay.llmsafespaces.dev/rotate"
PAUSED_ANNOTATION: Final = "relay.llmsafespaces.dev/paused"
DEFAULT_UPSTREAM: Final = "https://opencode.ai/zen/v1"

InstanceStateName = Literal[
    "provisioning",
    "healthy",
    "unhealthy",
    "draining",
    "quota-exhausted",
    "terminated",
    "provisioning-failed",
]
STATES: Final[tuple[str, ...]] = get_args(InstanceStateName)
CONDITION_TYPES: Final[tuple[str, ...]] = (
    "Ready",
    "Degraded",
    "ProvisioningFailed",
    "Rotating",
    "FallbackActive",
)

Instance = dict[str, Any]
"""One ``status.instances[]`` entry; keys as the CRD spells them (``429Count`` included)."""

REQUIRED_INSTANCE_KEYS: Final = ("id", "provider", "region", "publicIP", "state", "healthy")


class Condition(TypedDict, total=False):
    type: str
    status: Literal["True", "False", "Unknown"]
    lastTransitionTime: str
    reason: str
    message: str
    observedGeneration: int


class SpecError(WspinError):
    """The spec cannot be acted on; the message names the field."""


@dataclass(frozen=True)
class ProviderSpec:
    provider: str
    region: str
    credentials: str
    shape: str = ""


@dataclass(frozen=True)
class RelaySpec:
    upstream_url: str
    providers: tuple[ProviderSpec, ...]
    replacement_timeout_seconds: float = 900.0
    """``healthCheck.replacementTimeout``: a VM not healthy this long after its launch, or
    unhealthy this long after it served, is replaced."""
    max_surge: int = 1
    """``healthCheck.maxSurge``: replacement VMs that may run at once beside the VMs they
    replace (one per slot at most); a replacement beyond it waits for one to finish. 0
    replaces in place instead: the unhealthy VM goes first, one slot at a time."""
    min_healthy: int = 1
    """``healthCheck.minHealthy``: healthy relays the fleet keeps while a replacement is in
    flight; a healthy VM is never retired if fewer would be left (capped at the slot count).
    Also the floor below which Ready is False and the "below minimum" alert fires."""

    def provider(self, name: str) -> ProviderSpec | None:
        return next((p for p in self.providers if p.provider == name), None)

    @property
    def provider_names(self) -> tuple[str, ...]:
        return tuple(p.provider for p in self.providers)


def parse_spec(cr: dict[str, Any]) -> RelaySpec:
    """The defaulted spec of ``cr``; raises ``SpecError`` for a spec that cannot be acted on."""
    spec = cr.get("spec") or {}
    providers = []
    seen: set[str] = set()
    for index, entry in enumerate(spec.get("providers") or []):
        name = str(entry.get("provider", ""))
        if not name:
            raise SpecError(f"spec.providers[{index}].provider is empty")
        if name in seen:
            raise SpecError(
                f"spec.providers lists provider {name!r} twice; the fleet runs one VM per provider",
                f"remove the duplicate spec.providers[{index}] entry",
            )
        seen.add(name)
        credentials = entry.get("credentialsRef") or {}
        providers.append(
            ProviderSpec(
                provider=name,
                region=str(entry.get("region", "")),
                credentials=str(credentials.get("name", "")),
                shape=str(entry.get("shape", "") or ""),
            )
        )
    health = spec.get("healthCheck") or {}
    timeout = parse_duration(
        str(health.get("replacementTimeout") or "15m"), "spec.healthCheck.replacementTimeout"
    )
    return RelaySpec(
        upstream_url=str(spec.get("upstreamURL") or DEFAULT_UPSTREAM),
        providers=tuple(providers),
        replacement_timeout_seconds=timeout,
        max_surge=_count(health, "maxSurge", 1),
        min_healthy=_count(health, "minHealthy", 1),
    )


def _count(health: dict[str, Any], name: str, default: int) -> int:
    """A non-negative integer field of ``spec.healthCheck`` (the CRD's schema says so too;
    this catches a CR stored before the field existed in it)."""
    value = health.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpecError(
            f"spec.healthCheck.{name} must be a non-negative integer (got {value!r})",
            f"set spec.healthCheck.{name} to e.g. {default}",
        )
    return value


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(text: str, field: str) -> float:
    """A Go duration string (``15m``, ``1h30m``, ``5s``) in seconds."""
    value = text.strip()
    position, total = 0, 0.0
    for match in _DURATION_PART.finditer(value):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if not value or position != len(value):
        raise SpecError(
            f"{field} is not a duration (got {text!r})", f"set {field} to a value like 15m or 90s"
        )
    return total


def new_instance(
    *,
    instance_id: str,
    provider: str,
    region: str,
    public_ip: str = "",
    state: str = "provisioning",
    healthy: bool = False,
    **extra: Any,
) -> Instance:
    """An instance entry with every schema-required key present."""
    return {
        "id": instance_id,
        "provider": provider,
        "region": region,
        "publicIP": public_ip,
        "state": state,
        "healthy": healthy,
        **extra,
    }


def placeholder_id(provider: str) -> str:
    """The ID of a slot with no VM (a failed or in-flight launch); never passed to Destroy."""
    return f"{provider}-provisioning"


def replacement_placeholder_id(provider: str) -> str:
    """The ID of a slot's replacement that has no VM yet (a launch waiting out its backoff);
    never passed to Destroy."""
    return f"{provider}-replacement"


def has_real_id(instance: Instance) -> bool:
    """True when ``instance`` names a cloud VM (not a placeholder) that Destroy may act on."""
    instance_id = str(instance.get("id") or "")
    provider = str(instance.get("provider") or "")
    return bool(instance_id) and instance_id not in (
        placeholder_id(provider),
        replacement_placeholder_id(provider),
    )
