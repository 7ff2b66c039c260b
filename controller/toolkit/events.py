"""Kubernetes Events about the objects the controller reconciles, one per episode.

An *episode* is one occurrence of a condition worth telling a human about (a verification
failure of one pod, a rejected token of one revision). A level-based reconciler sees the
same episode on every pass; the caller names it with ``episode`` and the recorder writes its
Event once, remembering the last ``limit`` episodes (``episodes.Seen``). Across a restart the
reconcilers' own status (a condition that already records the episode, ``episodes``) is the
memory; this is the in-process guard that keeps a requeue from repeating an Event.

Best effort: a failed Event is logged and dropped (the conditions carry the state). Messages
lose the user and password of any URL in them (they may quote what a user wrote) and pass
through ``redact`` before they are cut to the API's 1 KiB limit, so a cut never exposes the
tail of a secret a full-length match would have removed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final, Literal

from controller.toolkit.episodes import Seen
from controller.types import Obj
from wspin.core.clock import Clock, format_time, utc_now
from wspin.core.errors import NamespaceTerminating
from wspin.core.kinds import EVENTS, Resource
from wspin.core.logs import fields
from wspin.core.redact import strip_url_credentials
from wspin.kube.client import Kube

log = logging.getLogger("controller.events")

EventType = Literal["Normal", "Warning"]
COMPONENT: Final = "wspin-controller"
MESSAGE_LIMIT: Final = 1024


def event_body(
    obj: Obj, resource: Resource, type_: EventType, reason: str, message: str, now: str
) -> Obj:
    """A core/v1 Event about ``obj`` (named after it, in its namespace)."""
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    return {
        "metadata": {"generateName": f"{meta['name']}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
        },
        "reason": reason,
        "message": message[:MESSAGE_LIMIT],
        "type": type_,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": COMPONENT,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


class EventRecorder:
    """Writes Events through ``kube``, at most one per named episode."""

    def __init__(
        self,
        kube: Kube,
        *,
        clock: Clock = utc_now,
        redact: Callable[[str], str] = lambda text: text,
        limit: int = 4096,
    ) -> None:
        self.kube = kube
        self.clock = clock
        self.redact = redact
        self._seen = Seen(limit)

    async def emit(
        self,
        obj: Obj,
        resource: Resource,
        type_: EventType,
        reason: str,
        message: str,
        *,
        episode: str | None = None,
    ) -> bool:
        """Record the Event; False when ``episode`` was already reported or the write failed."""
        meta = obj["metadata"]
        key = (str(meta.get("uid") or meta["name"]), reason, episode or "")
        if episode is not None and key in self._seen:
            return False
        text = self.redact(strip_url_credentials(message))
        body = event_body(obj, resource, type_, reason, text, format_time(self.clock()))
        try:
            await self.kube.create(EVENTS, body, body["metadata"]["namespace"])
        except NamespaceTerminating:
            return False  # the object goes with its namespace: nobody will read the Event
        except Exception as err:  # best effort: the conditions already say it
            log.warning(
                "could not record event",
                extra=fields(
                    object=f"{meta.get('namespace') or ''}/{meta['name']}",
                    reason=reason,
                    error=str(err),
                ),
            )
            return False
        if episode is not None:
            self._seen.add(key)
        return True
