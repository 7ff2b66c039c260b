"""Who a workspace belongs to, and what it may ask for, as the platform says. Pure.

A tenant writes its Workspaces, pods and their labels; it does not write Namespaces. So every
decision that must not be the tenant's own reads the Namespace's labels (or an operator's
flag), never a field or label of an object the tenant creates:

- ``llmsafespaces.dev/tenant`` on a Namespace names the tenant whose quota its workspace pods
  use; a Namespace without it is a tenant of its own. Several namespaces with one value share
  one quota.
- ``llmsafespaces.dev/org`` names the organisation the Namespace belongs to: the org whose
  suspension stops its workspaces, and the only ``spec.owner.orgID`` a Workspace there may
  state.
- ``llmsafespaces.dev/allow-runtime-class-override: "true"`` lets Workspaces in the Namespace
  set any ``spec.runtimeClass`` ("" included, which leaves the sandbox runtime); elsewhere only
  the classes the operator lists in ``--allowed-runtime-classes`` may be named.
- ``llmsafespaces.dev/workspace-writers: trusted`` makes the Namespace the platform API's: only
  trusted writers (``wspin.core.owners``) may create or change Workspaces there. The namespace
  the operator names with ``--workspaces-namespace`` is one too, labelled or not.

The webhook's validator and tenant quota and the controller read the labels from a watch of
Namespaces; the chart documents them for the platform that creates workspace namespaces.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from wspin.core.errors import ConfigError
from wspin.core.objects import ObjectKey

LABEL_TENANT: Final = "llmsafespaces.dev/tenant"
"""Namespace label: the tenant whose quota the namespace's workspace pods use."""
LABEL_ORG: Final = "llmsafespaces.dev/org"
"""Namespace label: the organisation the namespace belongs to."""
LABEL_RUNTIME_CLASS_OVERRIDE: Final = "llmsafespaces.dev/allow-runtime-class-override"
"""Namespace label: "true" lets Workspaces there choose any runtime class."""
LABEL_WORKSPACE_WRITERS: Final = "llmsafespaces.dev/workspace-writers"
"""Namespace label: "trusted" lets only trusted writers write Workspaces there."""
TRUSTED_WRITERS_ONLY: Final = "trusted"
NAMESPACE_LABELS: Final = (
    LABEL_TENANT,
    LABEL_ORG,
    LABEL_RUNTIME_CLASS_OVERRIDE,
    LABEL_WORKSPACE_WRITERS,
)
"""The labels read from Namespaces (the watch keeps only these)."""

RUNTIME_CLASSES_FLAG: Final = "--allowed-runtime-classes"
RUNTIME_CLASSES_VALUE: Final = "controller.workspaces.allowedRuntimeClasses"
# A RuntimeClass name is a DNS subdomain.
_RUNTIME_CLASS = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")

Labels = Mapping[str, str]


# -- the operator's allow list ----------------------------------------------------------------


def runtime_classes_from(value: str | None) -> frozenset[str]:
    """``--allowed-runtime-classes`` (declared in ``wspin.core.flags``) as names; ConfigError
    naming the flag and value for one that is no name."""
    names = {item.strip() for item in (value or "").split(",") if item.strip()}
    for name in sorted(names):
        if not _RUNTIME_CLASS.match(name):
            raise ConfigError(
                f"{RUNTIME_CLASSES_FLAG} entry {name!r} is not a RuntimeClass name",
                f"set {RUNTIME_CLASSES_FLAG} / {RUNTIME_CLASSES_VALUE} to names like 'kata'",
            )
    return frozenset(names)


# -- decisions --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tenant:
    """A quota identity: a ``llmsafespaces.dev/tenant`` value, or one unlabelled namespace."""

    key: str
    """``label:<value>`` or ``namespace:<name>``: the two can never collide."""
    shown: str
    """The tenant in words, for a denial."""


def tenant_of(namespace: str, labels: Labels) -> Tenant:
    """The tenant a namespace's workspace pods count against."""
    value = labels.get(LABEL_TENANT)
    if value:
        return Tenant(f"label:{value}", f"tenant {value!r}")
    return Tenant(f"namespace:{namespace}", f"namespace {namespace!r}")


def org_of(labels: Labels) -> str | None:
    """The organisation the namespace belongs to, or None."""
    return labels.get(LABEL_ORG) or None


def org_problem(org_id: Any, namespace: str, labels: Labels) -> str | None:
    """Why ``spec.owner.orgID`` cannot stand in this namespace, or None.

    An empty orgID always may; a set one must be the namespace's org: the org decides whose
    suspension stops the workspace, so a tenant must not pick it."""
    if org_id in (None, ""):
        return None
    if not isinstance(org_id, str):
        return "spec.owner.orgID must be a string"
    org = org_of(labels)
    if org == org_id:
        return None
    if org is None:
        return (
            f"spec.owner.orgID {org_id!r} names an organisation, but namespace {namespace!r} "
            f"belongs to none (no {LABEL_ORG} label); leave orgID empty, or ask the platform "
            "to label the namespace (if it was labelled a moment ago, retry)"
        )
    return (
        f"spec.owner.orgID {org_id!r} is not the organisation of namespace {namespace!r} "
        f"({LABEL_ORG}={org}); leave orgID empty or set it to {org!r}"
    )


def writers_problem(
    namespace: str, labels: Labels, *, trusted: bool, api_namespace: str = ""
) -> str | None:
    """Why this requester may not write Workspaces in ``namespace``, or None: a namespace the
    platform's API manages takes Workspace writes from trusted writers only."""
    managed = labels.get(LABEL_WORKSPACE_WRITERS) == TRUSTED_WRITERS_ONLY or (
        bool(api_namespace) and namespace == api_namespace
    )
    if trusted or not managed:
        return None
    return (
        f"namespace {namespace!r} is managed by the platform's API "
        f"({LABEL_WORKSPACE_WRITERS}={TRUSTED_WRITERS_ONLY} or --workspaces-namespace): only "
        "trusted writers (--trusted-workspace-writers / workspaces.trustedWriters) may create "
        "or change Workspaces here; create your Workspace through the API, or in your own "
        "namespace"
    )


def runtime_class_problem(
    runtime_class: Any, namespace: str, labels: Labels, allowed: frozenset[str]
) -> str | None:
    """Why ``spec.runtimeClass`` is not the tenant's to choose here, or None.

    None (absent) takes the cluster default. Any other value, "" included (it clears the
    pod's runtimeClassName and so leaves the sandbox runtime), needs the platform's say: a
    class the operator allows everywhere, or a namespace the platform labelled."""
    if runtime_class is None:
        return None
    if not isinstance(runtime_class, str):
        return "spec.runtimeClass must be a string"
    if labels.get(LABEL_RUNTIME_CLASS_OVERRIDE) == "true" or runtime_class in allowed:
        return None
    shown = repr(runtime_class) if runtime_class else "'' (no runtime class: leaves the sandbox)"
    listed = ", ".join(sorted(allowed)) or "none"
    return (
        f"spec.runtimeClass {shown} overrides the cluster's sandbox runtime, which the "
        f"platform decides: allowed everywhere are {listed} ({RUNTIME_CLASSES_FLAG} / "
        f"{RUNTIME_CLASSES_VALUE}); any other needs namespace {namespace!r} labelled "
        f'{LABEL_RUNTIME_CLASS_OVERRIDE}="true" by the platform. Remove spec.runtimeClass to '
        "use the default"
    )


def namespace_view(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """What a watch of Namespaces keeps: the name, the resourceVersion and our labels."""
    meta = namespace.get("metadata") or {}
    labels = meta.get("labels") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "resourceVersion": meta.get("resourceVersion"),
            "labels": {k: labels[k] for k in NAMESPACE_LABELS if isinstance(labels.get(k), str)},
        }
    }


class _Cache(Protocol):
    def get(self, key: ObjectKey) -> dict[str, Any] | None: ...


class NamespaceLabels:
    """Our labels of each Namespace, read from a watch-fed cache (never the API).

    A namespace the cache does not hold (created a moment ago, or gone) has no labels: every
    decision then takes the platform's default, never a tenant's choice."""

    def __init__(self, cache: _Cache) -> None:
        self._cache = cache

    def of(self, namespace: str) -> Labels:
        found = self._cache.get(ObjectKey("", namespace))
        labels = ((found or {}).get("metadata") or {}).get("labels") or {}
        return labels if isinstance(labels, dict) else {}
