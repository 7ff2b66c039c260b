"""The workspace container's requests and limits from ``spec.resources`` (pure).

A Workspace states its compute in the flat Workspace shape: ``cpu`` and ``memory`` are the
requests, ``cpuLimit`` and ``memoryLimit`` the limits. The Kubernetes shape
(``requests``/``limits``) is read too, for manifests written that way; when one quantity is
given both ways the flat field wins here, and the Workspace validator denies such a
Workspace on admission so the ambiguity never reaches a cluster with the webhook running.

Every workspace pod gets requests and limits: an absent request is 500m CPU / 512Mi memory,
an absent limit is four times the request (burst room for builds without letting one
workspace starve the node). An absent request with a limit below the default takes the
limit, so the pod stays valid (a request above its limit is refused by the API server).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Final

from controller.types import Obj
from wspin.core.errors import WspinError
from wspin.core.quantity import QuantityError, multiply, parse_quantity
from wspin.core.workspace import WorkspaceSpec
from wspin.core.workspace_defaults import (
    DEFAULT_CPU_REQUEST,
    DEFAULT_MEMORY_REQUEST,
    LIMIT_BURST_FACTOR,
)

# (flat field, Kubernetes section, resource name)
_FIELDS: Final = (
    ("cpu", "requests", "cpu"),
    ("memory", "requests", "memory"),
    ("cpuLimit", "limits", "cpu"),
    ("memoryLimit", "limits", "memory"),
)


class ResourcesError(WspinError):
    """``spec.resources`` cannot become container resources; the message names the field."""


def _amount(path: str, value: str) -> Fraction:
    """The quantity's exact value; ResourcesError naming the field when it is not one."""
    try:
        return parse_quantity(value)
    except QuantityError as err:
        raise ResourcesError(
            f"{path} {err}", "write it like '500m' or '2' (cpu) or '512Mi' (memory)"
        ) from None


def given_quantities(resources: Obj) -> dict[tuple[str, str], tuple[str, str]]:
    """(section, name) → (field path, value) for every quantity the Workspace sets.

    The Kubernetes shape is read first and the flat shape second, so a flat field wins.
    """
    found: dict[tuple[str, str], tuple[str, str]] = {}
    for section in ("requests", "limits"):
        block = resources.get(section)
        if block is None:
            continue
        if not isinstance(block, dict):
            raise ResourcesError(f"spec.resources.{section} must be an object")
        for name in ("cpu", "memory"):
            if block.get(name) not in (None, ""):
                found[(section, name)] = (f"spec.resources.{section}.{name}", str(block[name]))
    for flat, section, name in _FIELDS:
        if resources.get(flat) not in (None, ""):
            found[(section, name)] = (f"spec.resources.{flat}", str(resources[flat]))
    return found


def container_resources(spec: Obj) -> Obj:
    """``resources`` for the workspace container; raises ResourcesError naming the field."""
    resources = WorkspaceSpec.of(spec).resources
    if resources is None:
        resources = {}
    if not isinstance(resources, dict):
        raise ResourcesError("spec.resources must be an object")
    given = given_quantities(resources)
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    for name, default in (("cpu", DEFAULT_CPU_REQUEST), ("memory", DEFAULT_MEMORY_REQUEST)):
        request = given.get(("requests", name))
        limit = given.get(("limits", name))
        request_amount = _amount(*request) if request is not None else None
        limit_amount = _amount(*limit) if limit is not None else None
        if request is not None:
            requests[name] = request[1]
        elif limit is not None and limit_amount is not None and limit_amount < _amount("", default):
            requests[name] = limit[1]
        else:
            requests[name] = default
        limits[name] = (
            limit[1] if limit is not None else multiply(requests[name], LIMIT_BURST_FACTOR)
        )
        if (
            request_amount is not None
            and limit_amount is not None
            and limit_amount < request_amount
        ):
            path = limit[0] if limit is not None else f"spec.resources ({name})"
            raise ResourcesError(
                f"{path} {limits[name]!r} is below the {name} request {requests[name]!r}",
                "raise the limit or lower the request",
            )
    return {"requests": requests, "limits": limits}
