"""Namespaces where workspaces cannot run: the injector never sees pods there. Pure.

The mutating webhook's namespaceSelector leaves out kube-system, the release namespace and
``webhook.excludedNamespaces`` so the cluster (and the webhook itself) can start pods while the
webhook is down. A workspace pod there would start without its pins, so the Workspace
validator refuses Workspaces in those namespaces and the controller refuses to build their
pods. The chart passes one list (``--excluded-namespaces``) to both processes, so the three
places cannot disagree.
"""

from __future__ import annotations

import re
from typing import Final

from wspin.core.errors import ConfigError

DEFAULT_NAMESPACE: Final = "llmsafespaces"
"""A process's own namespace when ``POD_NAMESPACE`` is not set (outside a pod)."""

ALWAYS_EXCLUDED: Final = "kube-system"
"""Never sent to the injector, whatever the flag says."""

FLAG: Final = "--excluded-namespaces"
HELM_VALUE: Final = "webhook.excludedNamespaces"

# A namespace name is an RFC 1123 DNS label.
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


WORKSPACES_FLAG: Final = "--workspaces-namespace"
WORKSPACES_VALUE: Final = "workspaces.namespace"


def workspaces_namespace_from(value: str | None) -> str:
    """``--workspaces-namespace``: "" or a namespace name; ConfigError naming the flag."""
    name = (value or "").strip()
    if name and not _NAMESPACE.match(name):
        raise ConfigError(
            f"{WORKSPACES_FLAG} {name!r} is not a namespace name (lowercase RFC 1123 label)",
            f"set {WORKSPACES_FLAG} / {WORKSPACES_VALUE} to a namespace name, or leave it empty",
        )
    if name == ALWAYS_EXCLUDED:
        raise ConfigError(
            f"{WORKSPACES_FLAG} cannot be {ALWAYS_EXCLUDED}: the cluster's own pods start there "
            "while the webhook is down",
            f"set {WORKSPACES_FLAG} / {WORKSPACES_VALUE} to another namespace",
        )
    return name


def excluded_namespaces_from(
    value: str | None, own_namespace: str, workspaces_namespace: str = ""
) -> frozenset[str]:
    """The flag's namespaces plus kube-system and ``own_namespace``; ConfigError on a name
    that cannot be a namespace, naming the flag and the Helm value.

    ``own_namespace`` is left out when it is the ``workspaces_namespace`` (the platform's API,
    the controller and the Workspaces share one namespace): the injector only ever sees pods
    labelled as workspace pods, so wspin's own pods there still start without it."""
    names = {item.strip() for item in (value or "").split(",") if item.strip()}
    for name in sorted(names):
        if not _NAMESPACE.match(name):
            raise ConfigError(
                f"{FLAG} entry {name!r} is not a namespace name (lowercase RFC 1123 label)",
                f"set {FLAG} / {HELM_VALUE} to namespace names like 'monitoring'",
            )
    own = "" if own_namespace == workspaces_namespace else own_namespace
    return frozenset({ALWAYS_EXCLUDED, own, *names} - {""})


def excluded_namespace_problem(namespace: str, excluded: frozenset[str]) -> str | None:
    """Why no workspace may run in ``namespace``, or None when it may."""
    if namespace not in excluded:
        return None
    return (
        f"namespace {namespace!r} is excluded from the wspin pod webhook (kube-system, the "
        f"release namespace and {HELM_VALUE}), so a workspace pod there would start without "
        "its pinned agentd and opencode; create the Workspace in another namespace"
    )
