"""Once per episode: whether what a pass found is new, so its Event, log line or metric
increment is sent once and not on every pass.

An *episode* is one occurrence of something worth telling a human about (a verification
failure of one pod, a refusal by one webhook, a foreign object in the way, a router
rejecting one token). A level-based reconciler sees the same episode on every pass until
it ends; two memories say it was seen:

- the object's own status, the one that outlives a restart: a condition that already
  records the episode (``recorded_as`` builds that test). ``is_new`` asks the object as the
  pass read it; ``new_episode`` then asks the live object too, because the cache can lag
  behind a status written a moment ago and a lagging cache would send a report twice;
- ``Seen``, the in-process memory of the last episodes named to the ``EventRecorder``: a
  requeue that runs before the status write lands does not repeat the Event.

Reports are sent only after the status records the episode, so a failed status write means
a retry that still finds the episode new, never a second report of it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

from controller.toolkit.conditions import find_condition
from controller.types import Obj
from wspin.core.kinds import Resource
from wspin.kube.client import Kube

Recorded = Callable[[list[Obj]], bool]
"""Whether a list of conditions already records the episode."""


def recorded_as(
    type_: str,
    *,
    status: str | None = None,
    reason: str | None = None,
    message: str | Callable[[str], bool] | None = None,
) -> Recorded:
    """The episode is recorded when the ``type_`` condition has this ``status`` and
    ``reason`` (None: any) and a ``message`` equal to the one given, or one the predicate
    accepts (it gets the message as text, "" when there is none)."""

    def recorded(conditions: list[Obj]) -> bool:
        found = find_condition(conditions, type_)
        if found is None:
            return False
        if status is not None and found.get("status") != status:
            return False
        if reason is not None and found.get("reason") != reason:
            return False
        if message is None:
            return True
        if isinstance(message, str):
            return bool(found.get("message") == message)
        return message(str(found.get("message") or ""))

    return recorded


def conditions_of(obj: Obj | None) -> list[Obj]:
    """``status.conditions`` of ``obj`` ([] when it has none)."""
    return list(((obj or {}).get("status") or {}).get("conditions") or [])


def is_new(obj: Obj, recorded: Recorded) -> bool:
    """True unless ``obj``'s conditions (as read) record the episode."""
    return not recorded(conditions_of(obj))


async def new_episode(kube: Kube, resource: Resource, obj: Obj, recorded: Recorded) -> bool:
    """True unless ``obj``'s conditions, cached and then live, record the episode; False
    too when the object is gone (nobody is left to tell)."""
    if not is_new(obj, recorded):
        return False
    meta = obj["metadata"]
    live = await kube.get_or_none(resource, meta["name"], meta.get("namespace"))
    return live is not None and is_new(live, recorded)


class Seen:
    """The last ``limit`` episodes reported by this process, oldest forgotten first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._keys: OrderedDict[Hashable, None] = OrderedDict()

    def __contains__(self, key: Hashable) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, key: Hashable) -> None:
        """Remember ``key`` (one already remembered keeps its place)."""
        self._keys[key] = None
        while len(self._keys) > self.limit:
            self._keys.popitem(last=False)
