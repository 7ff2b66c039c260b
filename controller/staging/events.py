"""Events the staging pass records on a Workspace, each message redacted before it leaves.

Best effort: a failed Event is logged and dropped (the conditions carry the state); the
message is cut to the API's 1 KiB limit after redaction, so a cut can never expose the
tail of a key that a full-length match would have removed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Final, Literal

from controller.types import Obj
from wspin.logs import fields
from wspin.resources import EVENTS, WORKSPACES, Kube

log = logging.getLogger("controller.staging")

EventType = Literal["Normal", "Warning"]
SOURCE: Final = "wspin-controller"

CREDENTIAL_REVOKED: Final = "CredentialRevoked"
ROTATE_ESCALATED: Final = "RelayRotateEscalated"
ROTATE_ESCALATION_FAILED: Final = "RelayRotateEscalationFailed"
ENVELOPE_ORPHANED: Final = "RelayEnvelopeOrphaned"
ROUTER_REJECTED: Final = "CredentialRouterRejected"
NAME_CONFLICT: Final = "RelayNameConflict"


class EventRecorder:
    """Writes core/v1 Events about Workspaces through ``kube``."""

    def __init__(
        self, kube: Kube, redact: Callable[[str], str], clock: Callable[[], datetime]
    ) -> None:
        self.kube = kube
        self.redact = redact
        self.clock = clock

    async def emit(self, ws: Obj, type_: EventType, reason: str, message: str) -> None:
        meta = ws["metadata"]
        namespace = meta.get("namespace")
        now = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": WORKSPACES.api_version,
                "kind": WORKSPACES.kind,
                "name": meta["name"],
                "namespace": namespace,
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": self.redact(message)[:1024],
            "type": type_,
            "source": {"component": SOURCE},
            "reportingComponent": SOURCE,
            "reportingInstance": SOURCE,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.kube.create(EVENTS, body, namespace)
        except Exception as err:  # best effort: the conditions already say it
            log.warning(
                "could not record event",
                extra=fields(
                    workspace=f"{namespace}/{meta['name']}", reason=reason, error=str(err)
                ),
            )
