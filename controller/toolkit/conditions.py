"""Kubernetes-style conditions: one representation for every kind the controller writes.

A condition is a plain dict (``type``, ``status``, ``reason``, ``message``,
``observedGeneration``, ``lastTransitionTime``), exactly what goes on the wire. Setting one
is pure and returns a new list; ``lastTransitionTime`` moves only when ``status`` changes,
so re-stating a condition is a no-op and never causes a status write.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, Literal

from controller.types import Obj
from wspin.core.redact import strip_url_credentials

ConditionStatus = Literal["True", "False", "Unknown"]

MESSAGE_LIMIT: Final = 4096
"""Characters of a message a condition keeps (the CRDs allow 32768, and a longer one would
fail the whole status write): messages quote what users wrote, and every cache holds them."""


def condition(
    type_: str,
    status: ConditionStatus | bool,
    reason: str,
    message: str = "",
    generation: int | None = 0,
) -> Obj:
    """A condition without its transition time (``set_condition`` stamps it). A bool
    status is spelled ``True``/``False``; ``generation`` None leaves observedGeneration out."""
    value = ("True" if status else "False") if isinstance(status, bool) else status
    # Messages quote what users wrote (a package source, an image): no URL's user or
    # password reaches the status.
    text = strip_url_credentials(message)
    if len(text) > MESSAGE_LIMIT:
        text = text[: MESSAGE_LIMIT - 1] + "…"
    built: Obj = {"type": type_, "status": value, "reason": reason, "message": text}
    if generation is not None:
        built["observedGeneration"] = generation
    return built


def find_condition(conditions: Iterable[Obj], type_: str) -> Obj | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def is_true(conditions: Iterable[Obj], type_: str) -> bool:
    found = find_condition(conditions, type_)
    return found is not None and found.get("status") == "True"


def set_condition(conditions: Sequence[Obj], new: Obj, now: str) -> list[Obj]:
    """``conditions`` with ``new`` in place of its type; the transition time is kept when the
    status did not change, else set to ``now``. Other types keep their order."""
    old = find_condition(conditions, new["type"])
    stamped = dict(new)
    if old is not None and old.get("status") == new["status"] and old.get("lastTransitionTime"):
        stamped["lastTransitionTime"] = old["lastTransitionTime"]
    else:
        stamped["lastTransitionTime"] = now
    if old is None:
        return [*conditions, stamped]
    return [stamped if c is old else c for c in conditions]


def set_conditions(conditions: Sequence[Obj], new: Iterable[Obj], now: str) -> list[Obj]:
    """``set_condition`` for each of ``new`` in turn."""
    result = list(conditions)
    for item in new:
        result = set_condition(result, item, now)
    return result


def remove_conditions(conditions: Sequence[Obj], types: Iterable[str]) -> list[Obj]:
    gone = set(types)
    return [c for c in conditions if c.get("type") not in gone]
