"""A Workspace as the controller reads it: every spec, status and metadata field named once.

Pure and cheap: ``Workspace.of(obj)`` keeps the decoded object and each accessor reads its one
field when asked, so a pass builds the view once and pays only for what it reads. Nothing here
validates: a field of the wrong type reads as absent, or as the value its readers have always
seen (each accessor says which), never as an exception, so a malformed object stored before
the validator knew a field cannot crash a pass. Where a reader refuses a malformed value with
a message quoting it (the pod builder), the accessor hands the value back as written
(``object``) and that reader checks it.

Writes are not views: the status the controller writes is built by its record modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from wspin.core.clock import parse_time
from wspin.core.owners import spec_owner

Obj = dict[str, Any]

SUSPEND: Final = "suspend"
"""``spec.suspend``: left out of what a spec change means to recovery (``spec_digest``)."""

# Status fields a module besides the status record writes, named here for their writers.
CREDENTIALS_ROTATION: Final = "credentialsRotation"
RELAY_STAGING: Final = "relayStaging"
SECRETS_DELIVERY: Final = "secretsDelivery"
CONTROLLER_RESTART_COUNT: Final = "controllerRestartCount"
CONSECUTIVE_HEALTH_FAILURES: Final = "consecutiveHealthFailures"
# ... and those the status record writes.
PVC_NAME: Final = "pvcName"
PVC_UID: Final = "pvcUID"
FAILURE_REASON: Final = "failureReason"
OBSERVED_RESTART_GENERATION: Final = "observedRestartGeneration"
SUSPENDED_AT: Final = "suspendedAt"


def _object(value: object) -> Mapping[str, Any]:
    """``value`` when it is a JSON object (decoded JSON objects are dicts: a ``dict`` check
    costs a tenth of an ABC's), else empty."""
    return value if isinstance(value, dict) else _EMPTY


_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})


def _text(value: object) -> str:
    """``str(value or "")``: what the status readers have always made of a field."""
    return str(value or "")


def _integer(value: object) -> int | None:
    """An int (never a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _whole(value: object) -> int:
    """``value`` when it is a whole number > 0, else 0."""
    number = _integer(value)
    return number if number is not None and number > 0 else 0


# The views are named tuples: immutable, and built for the price of a tuple, since a pass
# builds them often (a frozen dataclass or a ``cached_property`` costs several times as much).


class WorkspaceSpec(NamedTuple):
    """``spec``: what the Workspace's writer asks for (a tenant: hostile)."""

    raw: Mapping[str, Any]

    @classmethod
    def of(cls, spec: object) -> WorkspaceSpec:
        """The view of ``spec`` (anything but an object reads as an empty spec)."""
        return cls(spec if isinstance(spec, dict) else _EMPTY)

    # -- the pod ------------------------------------------------------------------------------

    @property
    def runtime(self) -> str | None:
        """``spec.runtime``: a RuntimeEnvironment name or an image; None unless a string."""
        value = self.raw.get("runtime")
        return value if isinstance(value, str) else None

    @property
    def architecture(self) -> object:
        """``spec.architecture`` as written (None: absent); the pod builder checks it."""
        return self.raw.get("architecture")

    @property
    def runtime_class(self) -> object:
        """``spec.runtimeClass`` as written (None: absent or null; "" is a choice: no runtime
        class); the tenancy gate checks it (``tenancy.runtime_class_problem``)."""
        return self.raw.get("runtimeClass")

    @property
    def pod_security_context(self) -> object:
        """``spec.podSecurityContext`` as written; the pod builder checks it."""
        return self.raw.get("podSecurityContext")

    @property
    def resources(self) -> object:
        """``spec.resources`` as written; the pod builder checks it (``compute``)."""
        return self.raw.get("resources")

    @property
    def storage(self) -> object:
        """``spec.storage`` as written; the PVC builder checks it."""
        return self.raw.get("storage")

    @property
    def packages(self) -> object:
        """``spec.packages`` as written; the setup script's builder checks it."""
        return self.raw.get("packages")

    @property
    def init_script(self) -> object:
        """``spec.initScript`` as written; the setup script's builder checks it."""
        return self.raw.get("initScript")

    @property
    def max_active_sessions(self) -> int | None:
        """``spec.maxActiveSessions`` within the CRD's 1-20, else None (the default applies:
        an object stored before the field was declared has none)."""
        value = _integer(self.raw.get("maxActiveSessions"))
        return value if value is not None and 1 <= value <= 20 else None

    @property
    def _network_access(self) -> Mapping[str, Any]:
        return _object(self.raw.get("networkAccess"))

    @property
    def dev_preview(self) -> bool:
        """``spec.networkAccess.devPreview``: only a literal true enables it."""
        return self._network_access.get("devPreview") is True

    @property
    def egress(self) -> list[Any]:
        """``spec.networkAccess.egress``: the declared entries as written (not a list: none)."""
        value = self._network_access.get("egress")
        return value if isinstance(value, list) else []

    @property
    def security_level(self) -> str | None:
        """``spec.securityLevel`` when a string (LLMSafeSpaces' levels), else None."""
        value = self.raw.get("securityLevel")
        return value if isinstance(value, str) else None

    # -- recycles and lifecycle ---------------------------------------------------------------

    @property
    def restart_generation(self) -> object:
        """``spec.restartGeneration`` as written (None: absent); the pod builder checks it."""
        return self.raw.get("restartGeneration")

    @property
    def restart_generation_or_zero(self) -> int:
        """``spec.restartGeneration`` when a whole number > 0, else 0."""
        return _whole(self.restart_generation)

    @property
    def suspend(self) -> bool | None:
        """``spec.suspend``: True (suspend), False (resume), None (no request, or not a
        bool)."""
        value = self.raw.get(SUSPEND)
        return value if isinstance(value, bool) else None

    @property
    def auto_suspend(self) -> Mapping[str, Any] | None:
        """``spec.autoSuspend`` when an object, else None."""
        value = self.raw.get("autoSuspend")
        return value if isinstance(value, dict) else None

    @property
    def auto_suspend_enabled(self) -> bool:
        """``spec.autoSuspend`` is an object whose ``enabled`` is not literally false."""
        auto = self.auto_suspend
        return auto is not None and auto.get("enabled") is not False

    @property
    def idle_timeout_seconds(self) -> int | None:
        """``spec.autoSuspend.idleTimeoutSeconds`` when an int, else None."""
        return _integer(_object(self.auto_suspend).get("idleTimeoutSeconds"))

    @property
    def timeout(self) -> int | None:
        """``spec.timeout`` (lifetime seconds) when an int, else None."""
        return _integer(self.raw.get("timeout"))

    @property
    def ttl_seconds_after_suspended(self) -> int | None:
        """``spec.ttlSecondsAfterSuspended`` when an int, else None."""
        return _integer(self.raw.get("ttlSecondsAfterSuspended"))

    # -- who ----------------------------------------------------------------------------------

    @property
    def owner(self) -> tuple[str, str] | str:
        """``spec.owner`` as (userID, orgID), "" for absent, or why it is malformed
        (``wspin.core.owners.spec_owner``). A tenant writes it: it proves nothing; the
        verified owner is ``owners.record_of``."""
        return spec_owner({"spec": self.raw})

    @property
    def owner_user_id(self) -> str:
        """``spec.owner.userID`` ("" when absent or malformed)."""
        owner = self.owner
        return owner[0] if isinstance(owner, tuple) else ""

    @property
    def owner_org_id(self) -> str:
        """``spec.owner.orgID`` ("" when absent or malformed)."""
        owner = self.owner
        return owner[1] if isinstance(owner, tuple) else ""

    def without_suspend(self) -> dict[str, Any]:
        """The spec but ``spec.suspend``: what a spec change means to recovery."""
        return {key: value for key, value in self.raw.items() if key != SUSPEND}


class WorkspaceStatus(NamedTuple):
    """``status``: what the controller recorded (only the controller writes it)."""

    raw: Mapping[str, Any]

    @classmethod
    def of(cls, status: object) -> WorkspaceStatus:
        """The view of ``status`` (anything but an object reads as an empty status)."""
        return cls(status if isinstance(status, dict) else _EMPTY)

    @property
    def phase(self) -> str:
        """``status.phase`` as text ("" before the controller wrote one)."""
        return _text(self.raw.get("phase"))

    @property
    def reason(self) -> str:
        return _text(self.raw.get("reason"))

    @property
    def message(self) -> str:
        return _text(self.raw.get("message"))

    @property
    def failure_reason(self) -> str:
        return _text(self.raw.get("failureReason"))

    @property
    def conditions(self) -> list[Any]:
        """``status.conditions`` as written (not a list: none)."""
        value = self.raw.get("conditions")
        return value if isinstance(value, list) else []

    @property
    def pvc_name(self) -> str:
        return _text(self.raw.get("pvcName"))

    @property
    def pvc_uid(self) -> str:
        return _text(self.raw.get("pvcUID"))

    @property
    def restart_count(self) -> int:
        """``status.restartCount`` when an int, else 0."""
        return _integer(self.raw.get("restartCount")) or 0

    @property
    def observed_restart_generation(self) -> int | None:
        """``status.observedRestartGeneration`` when an int, else None."""
        return _integer(self.raw.get("observedRestartGeneration"))

    @property
    def credentials_rotation(self) -> int:
        """``status.credentialsRotation`` when a whole number > 0, else 0."""
        return _whole(self.raw.get(CREDENTIALS_ROTATION))

    @property
    def consecutive_failures(self) -> int:
        """``status.consecutiveFailures`` when a whole number > 0, else 0."""
        return _whole(self.raw.get("consecutiveFailures"))

    @property
    def observed_generation(self) -> int | None:
        return _integer(self.raw.get("observedGeneration"))

    @property
    def start_time(self) -> datetime | None:
        return parse_time(self.raw.get("startTime"))

    @property
    def suspended_at(self) -> datetime | None:
        return parse_time(self.raw.get("suspendedAt"))

    @property
    def last_activity_at(self) -> datetime | None:
        """``status.lastActivityAt`` (deprecated: the annotation wins)."""
        return parse_time(self.raw.get("lastActivityAt"))

    @property
    def consecutive_health_failures(self) -> object:
        """``status.consecutiveHealthFailures`` as written (its reader checks it)."""
        return self.raw.get(CONSECUTIVE_HEALTH_FAILURES)

    @property
    def relay_staging(self) -> object:
        """``status.relayStaging`` as written (relay staging checks it)."""
        return self.raw.get(RELAY_STAGING)

    @property
    def secrets_delivery(self) -> Mapping[str, Any]:
        """``status.secretsDelivery`` when an object, else empty."""
        return _object(self.raw.get(SECRETS_DELIVERY))


class Workspace(NamedTuple):
    """One Workspace: ``spec``, ``status`` and the metadata readers need."""

    obj: Mapping[str, Any]
    spec: WorkspaceSpec
    status: WorkspaceStatus

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Workspace:
        return cls(obj, WorkspaceSpec.of(obj.get("spec")), WorkspaceStatus.of(obj.get("status")))

    @property
    def metadata(self) -> Mapping[str, Any]:
        return _object(self.obj.get("metadata"))

    @property
    def name(self) -> str:
        return _text(self.metadata.get("name"))

    @property
    def namespace(self) -> str:
        return _text(self.metadata.get("namespace"))

    @property
    def uid(self) -> str:
        return _text(self.metadata.get("uid"))

    @property
    def generation(self) -> int:
        """``metadata.generation`` (0 when absent)."""
        return int(self.metadata.get("generation") or 0)

    @property
    def resource_version(self) -> str:
        return _text(self.metadata.get("resourceVersion"))

    @property
    def deleting(self) -> bool:
        """``metadata.deletionTimestamp`` is set."""
        return bool(self.metadata.get("deletionTimestamp"))

    @property
    def labels(self) -> Mapping[str, Any]:
        return _object(self.metadata.get("labels"))

    @property
    def annotations(self) -> Mapping[str, Any]:
        return _object(self.metadata.get("annotations"))
