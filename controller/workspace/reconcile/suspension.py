"""``spec.suspend``, a request the controller consumes: ``true`` asks to suspend, ``false`` to
resume, absent means no request (or one already acted on).

The API service writes the request; the controller acts on it, commits the resulting status
first, and then removes the field (reversed, a failed status write would lose the request).
Every request is consumed in every phase it can reach, including those where it changes
nothing, so none lingers to fire later: a ``false`` sent while the Workspace already runs would
otherwise resume it right after a later automated suspension, and a ``true`` sent while it is
already suspended would suspend it again right after a resume by an organisation's
reactivation. Two exceptions wait instead: a ``false`` while Suspending (acted on once the pod
is gone, by resuming), and any value while the Workspace is being deleted.

The field is removed with a JSON patch that first tests its value: a request written after
this pass read the Workspace (a resume right after a suspend) fails the test and stays for
the next pass, so no request is ever cleared unseen, and no retry loop or full-object update
is needed.
"""

from __future__ import annotations

import logging
from typing import Final

from controller.types import Obj, ObjectKey
from wspin.core.errors import Invalid, NotFound
from wspin.core.kinds import WORKSPACES
from wspin.core.logs import fields
from wspin.kube.client import Kube

log = logging.getLogger("controller.workspace")

SUSPEND_PATH: Final = "/spec/suspend"
_KEPT_WHILE: Final = ("Terminating", "Terminated")


def consumed(phase: str, request: bool | None) -> bool:
    """Whether a pass in ``phase`` clears ``request`` once its status is written."""
    if request is None or phase in _KEPT_WHILE:
        return False
    return not (request is False and phase == "Suspending")


async def clear_request(kube: Kube, ws: Obj, value: bool) -> str | None:
    """Remove ``spec.suspend`` if it still holds ``value``; returns the written version, or
    None when the request changed meanwhile (it is then the next pass's to act on) or the
    Workspace is gone. Other failures raise (the reconcile is retried)."""
    meta = ws["metadata"]
    ops = [
        {"op": "test", "path": SUSPEND_PATH, "value": value},
        {"op": "remove", "path": SUSPEND_PATH},
    ]
    try:
        updated = await kube.patch(
            WORKSPACES, meta["name"], ops, meta.get("namespace"), patch_type="json"
        )
    except Invalid:
        log.debug(
            "spec.suspend changed before it was cleared; the next pass acts on it",
            extra=fields(workspace=str(ObjectKey.of(ws))),
        )
        return None
    except NotFound:
        return None
    return str(updated["metadata"].get("resourceVersion", ""))
