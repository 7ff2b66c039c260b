"""The Warning Events of a workspace pod that has not started: what the pod's status cannot say.

A pod that waits for a volume (``FailedMount``, ``FailedAttachVolume``), a sandbox
(``FailedCreatePodSandBox``) or an image volume's pull shows only ``ContainerCreating`` or
``PodInitializing`` in its status; the kubelet and the attach controller say why in Events.
The stuck-pod detector (``stuck``) reads them only for such a pod, and only once it has waited
``stuck.EVENTS_AFTER``, so a pod that starts normally costs no read at all.

Every read is bounded: one page of at most ``PAGE`` Events selected by the pod's uid, each
message cut to ``MESSAGE_LIMIT``, and a pod's answer is reused for ``REUSE`` seconds (at most
``REMEMBERED`` pods remembered, keyed by namespace and pod uid), so a pod that keeps changing
cannot turn into a stream of lists. A failed read is not a failure of the Workspace: the
detector falls back to what the status says.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from controller.types import Obj
from wspin.core.clock import Clock, parse_time, utc_now
from wspin.core.errors import KubeAPIError
from wspin.core.kinds import EVENTS
from wspin.core.logs import fields
from wspin.kube.client import Kube

log = logging.getLogger("controller.workspace")

PAGE: Final = 50
"""Events read per pod: the kubelet folds repeats into one Event with a count, so a stuck pod
has a handful; a page this size holds them all."""
MESSAGE_LIMIT: Final = 1024
REUSE: Final = 60.0
"""Seconds a pod's Events are reused before they are read again."""
REMEMBERED: Final = 1024


@dataclass(frozen=True)
class PodEvent:
    """One Warning Event about the pod."""

    reason: str
    message: str
    last: datetime | None
    """When it was last seen (``lastTimestamp``, ``eventTime`` or creation)."""


def warnings(listing: Obj) -> tuple[PodEvent, ...]:
    """The Warning Events of an Event list, newest first, type-checked."""
    found = []
    for item in listing.get("items") or ():
        if not isinstance(item, dict) or item.get("type") != "Warning":
            continue
        reason, message = item.get("reason"), item.get("message")
        if not isinstance(reason, str) or not isinstance(message, str):
            continue
        meta = item.get("metadata")
        last = (
            parse_time(item.get("lastTimestamp"))
            or parse_time(item.get("eventTime"))
            or (parse_time(meta.get("creationTimestamp")) if isinstance(meta, dict) else None)
        )
        found.append(PodEvent(reason, message[:MESSAGE_LIMIT], last))
    found.sort(key=lambda event: event.last.isoformat() if event.last else "", reverse=True)
    return tuple(found)


class PodEventReader:
    """Reads a pod's Warning Events, bounded and reused (see the module docstring)."""

    def __init__(self, kube: Kube, *, clock: Clock = utc_now) -> None:
        self.kube = kube
        self.clock = clock
        self._seen: OrderedDict[tuple[str, str], tuple[datetime, tuple[PodEvent, ...]]] = (
            OrderedDict()
        )

    async def read(self, pod: Obj) -> tuple[PodEvent, ...]:
        """``pod``'s Warning Events (none when they cannot be read)."""
        meta = pod.get("metadata") or {}
        namespace, uid = str(meta.get("namespace") or ""), str(meta.get("uid") or "")
        if not namespace or not uid:
            return ()
        key, now = (namespace, uid), self.clock()
        remembered = self._seen.get(key)
        if remembered is not None and (now - remembered[0]).total_seconds() < REUSE:
            return remembered[1]
        try:
            listing = await self.kube.list(
                EVENTS, namespace, fields=f"involvedObject.uid={uid}", limit=PAGE
            )
        except KubeAPIError as err:
            log.info(
                "could not read the workspace pod's events",
                extra=fields(pod=f"{namespace}/{meta.get('name', '')}", error=err.message),
            )
            return ()
        found = warnings(listing)
        self._seen[key] = (now, found)
        self._seen.move_to_end(key)
        while len(self._seen) > REMEMBERED:
            self._seen.popitem(last=False)
        return found
