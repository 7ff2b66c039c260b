"""Whether an episode a Workspace's conditions record is new, asked of the cached Workspace
and then of the live one (``controller.toolkit.episodes.new_episode`` for Workspaces)."""

from __future__ import annotations

from controller.toolkit import episodes
from controller.types import Obj
from wspin.core.kinds import WORKSPACES
from wspin.kube.client import Kube


async def new_episode(kube: Kube, ws: Obj, recorded: episodes.Recorded) -> bool:
    """True unless ``ws``'s conditions (cached, then live) record the episode; False too when
    the Workspace is gone."""
    return await episodes.new_episode(kube, WORKSPACES, ws, recorded)
