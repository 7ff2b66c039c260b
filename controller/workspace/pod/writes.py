"""The writes of the objects a Workspace owns: create (checked for a foreign owner), the
password Secret written whole, and the pod's deletion with the termination grace.

Expected answers are not failures: AlreadyExists is our own earlier create (the cache lags) or
someone else's object at our name, read back and reported; a create that admission refused (a
webhook or policy, ``refusals``) becomes ``PodAdmissionRefused``, reported on the Workspace;
any other 422 on a create means the same body is refused every time until something changes,
so it becomes ``PodRejected`` (phase Failed with the API server's words, sent again after the
Configuration class's backoff) instead of a retry on the work queue's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from controller.types import Obj
from controller.workspace.pod import ownership
from controller.workspace.pod.credentials import WorkspaceCredentials, desired_password_secret
from controller.workspace.pod.names import PodRejected, desired_service_account
from controller.workspace.pod.refusals import PodAdmissionRefused, refusal_of
from wspin.core.errors import AlreadyExists, Invalid, KubeAPIError
from wspin.core.kinds import PODS, SECRETS, SERVICE_ACCOUNTS
from wspin.kube.client import Kube


class OwnedWrites:
    """Writes through the API for one controller process."""

    def __init__(
        self, kube: Kube, termination_grace: int, *, legacy_before: datetime | None = None
    ) -> None:
        self.kube = kube
        self.termination_grace = termination_grace
        self.legacy_before = legacy_before
        """Unlabelled objects created before this are an earlier release's (``ownership``)."""

    def owns(self, obj: Obj | None, ws: Obj, kind: str) -> bool:
        """True when ``obj`` is present and the Workspace's own."""
        return obj is not None and self.conflict(obj, ws, kind) is None

    def conflict(self, obj: Obj | None, ws: Obj, kind: str) -> ownership.ForeignHolding | None:
        """``ownership.conflict_of`` with this process's cut-off for earlier releases."""
        return ownership.conflict_of(obj, ws, kind, legacy_before=self.legacy_before)

    def check(self, obj: Obj | None, ws: Obj, kind: str) -> None:
        """Raise ``ForeignObject`` unless ``obj`` is absent or the Workspace's own."""
        found = self.conflict(obj, ws, kind)
        if found is not None:
            raise ownership.ForeignObject(found)

    async def create(
        self, resource: Any, body: Obj, ws: Obj, *, redact: WorkspaceCredentials | None = None
    ) -> None:
        """Create ``body``; ``ForeignObject`` when something that is not the Workspace's is
        at its name, ``PodAdmissionRefused`` when admission refuses it, ``PodRejected`` when
        the API server finds it invalid (messages with ``redact``'s values blanked: a refusal
        may quote the body)."""
        meta = ownership.stamp(body, ws)["metadata"]
        try:
            await self.kube.create(resource, body, meta["namespace"])
        except AlreadyExists:
            live = await self.kube.get_or_none(resource, meta["name"], meta["namespace"])
            self.check(live, ws, str(body.get("kind") or resource.kind))
        except KubeAPIError as err:
            message = redact.redact(err.message) if redact is not None else err.message
            refusal = refusal_of(message, str(body.get("kind") or resource.kind))
            if refusal is not None:
                raise PodAdmissionRefused(refusal) from None
            if isinstance(err, Invalid):
                raise PodRejected(
                    f"the API server rejected the {body.get('kind', 'object')}: {message}"
                ) from None
            raise

    async def write_secret(self, ws: Obj, credentials: WorkspaceCredentials) -> None:
        """Put ``credentials`` in ``workspace-pw-<ws>``: created, or, when a Secret is already
        at the name, replaced whole without reading it (its keys, labels and owner become
        ours; an unconditional update needs no resourceVersion). A Secret that cannot take
        our values (another type, or marked immutable) is reported as a foreign object and
        no pod is built on it."""
        body = ownership.stamp(desired_password_secret(ws, credentials), ws)
        meta = body["metadata"]
        try:
            await self.kube.create(SECRETS, body, meta["namespace"])
            return
        except AlreadyExists:
            pass
        try:
            await self.kube.replace(SECRETS, body)
        except Invalid as err:
            raise ownership.ForeignObject(
                ownership.ForeignHolding(
                    "Secret",
                    meta["name"],
                    f"it cannot hold the workspace credentials ({credentials.redact(err.message)})",
                )
            ) from None

    async def start_pod(self, ws: Obj, pod: Obj, credentials: WorkspaceCredentials) -> None:
        """The pod and what it needs first, in order: its service account (the API server
        refuses a pod whose account is missing), its credentials (the kubelet holds a pod
        whose Secret is missing), then the pod."""
        await self.create(SERVICE_ACCOUNTS, desired_service_account(ws), ws)
        await self.write_secret(ws, credentials)
        await self.create(PODS, pod, ws, redact=credentials)

    async def delete_pod(self, pod: Obj) -> None:
        """Delete the pod with the termination grace (agentd drains its sessions)."""
        meta = pod["metadata"]
        await self.kube.delete(
            PODS, meta["name"], meta.get("namespace"), grace_seconds=self.termination_grace
        )
