"""Whether an episode a condition records is new: asked of the cached Workspace, then of the
live one, since the cache can lag behind the status a pass wrote a moment ago. One Event and
one metric increment per episode rest on this answer."""

from __future__ import annotations

from collections.abc import Callable

from controller.types import Obj
from wspin.core.kinds import WORKSPACES
from wspin.kube.client import Kube

Recorded = Callable[[list[Obj]], bool]
"""Whether a list of conditions already records the episode."""


async def new_episode(kube: Kube, ws: Obj, recorded: Recorded) -> bool:
    """True unless ``ws``'s conditions (cached, then live) record the episode; False too when
    the Workspace is gone."""
    if recorded((ws.get("status") or {}).get("conditions") or []):
        return False
    meta = ws["metadata"]
    live = await kube.get_or_none(WORKSPACES, meta["name"], meta.get("namespace"))
    return live is not None and not recorded((live.get("status") or {}).get("conditions") or [])
