"""Helpers the staging tests share: the router's rotation hook and the Events a pass wrote."""

from __future__ import annotations

from typing import Any

from tests.controller.fakerouter import FakeRouterState
from tests.controller.staging.conftest import Stage
from wspin.core.kinds import EVENTS


async def publish_on_rotate(stage: Stage) -> None:
    async def publish(state: FakeRouterState) -> None:
        await stage.publish_pub(state.public_key, state.generation)

    stage.router.state.on_rotate = publish


async def events(stage: Stage, reason: str) -> list[dict[str, Any]]:
    listing = await stage.kube.list(EVENTS, stage.namespace)
    return [e for e in listing.get("items", []) if e.get("reason") == reason]
