"""What a process checks of the API server before it starts work: the server answers and
accepts our credentials, the process's namespace exists, and every resource it watches is
served (its CRD installed) and listable (RBAC).

Each failure is one ``ConfigError`` that names the cause and what fixes it, so a process
started against the wrong cluster, an unfinished install or a cluster without its RBAC exits 1
with one line instead of a traceback from whichever request happened to come first, or an
informer retrying a 403 for ever.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from wspin.core.errors import ConfigError, Forbidden, KubeAPIError, NotFound
from wspin.core.kinds import NAMESPACES, Resource
from wspin.kube.client import Kube

CRD_GROUP = "llmsafespaces.dev"
CRD_FIX = (
    "install the chart's CRDs (helm install/upgrade applies charts/wspin/crds; or "
    "kubectl apply -f charts/wspin/crds/)"
)
UNAUTHORIZED_STATUS = 401


@dataclass(frozen=True)
class StartNeeds:
    """What one process needs of the API server to start."""

    process: str
    """``controller`` or ``webhook``: who is starting, in the messages."""
    namespace: str
    namespace_fix: str
    """How to name the process's namespace (its environment variable and the chart's)."""
    watched: Sequence[Resource]
    """Every resource the process lists and watches cluster-wide."""
    rbac_fix: str
    """Which chart RBAC grants those lists."""
    credentials_fix: str
    """How to point the process at an API server with credentials it accepts."""


async def check_api_server(kube: Kube, needs: StartNeeds) -> None:
    """Raise ``ConfigError`` for the first thing in ``needs`` the API server cannot give."""
    server = kube.api.configuration.host
    try:
        await kube.request("GET", "/version", what="GET /version")
    except KubeAPIError as err:
        if err.status == 0:
            raise ConfigError(
                f"cannot reach the Kubernetes API server at {server}: {err.message}",
                needs.credentials_fix,
            ) from None
        if err.status == UNAUTHORIZED_STATUS:
            raise ConfigError(
                f"the Kubernetes API server at {server} refused the {needs.process}'s "
                f"credentials: {err.message}",
                needs.credentials_fix,
            ) from None
        # Some clusters hide /version from their users; the lists below still judge access.
    for resource in needs.watched:
        await _check_listable(kube, resource, needs)
    await _check_namespace(kube, needs)


async def _check_listable(kube: Kube, resource: Resource, needs: StartNeeds) -> None:
    name = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
    try:
        await kube.list(resource, limit=1)
    except NotFound:
        if resource.group == CRD_GROUP:
            raise ConfigError(
                f"the Kubernetes API server does not serve {name}: its CRD is not installed",
                CRD_FIX,
            ) from None
        raise ConfigError(
            f"the Kubernetes API server does not serve {name} "
            f"({resource.group or 'core'}/{resource.version})",
            "run the process against Kubernetes 1.32 or later",
        ) from None
    except Forbidden as err:
        raise ConfigError(
            f"the {needs.process} may not list {name} cluster-wide: {err.message}",
            needs.rbac_fix,
        ) from None
    except KubeAPIError as err:
        raise ConfigError(
            f"cannot list {name} on the Kubernetes API server: {err.message}",
            needs.credentials_fix,
        ) from None


async def _check_namespace(kube: Kube, needs: StartNeeds) -> None:
    try:
        found = await kube.list(NAMESPACES, fields=f"metadata.name={needs.namespace}", limit=1)
    except KubeAPIError as err:
        raise ConfigError(
            f"cannot look up the {needs.process}'s namespace {needs.namespace!r}: {err.message}",
            needs.rbac_fix,
        ) from None
    if not found.get("items"):
        raise ConfigError(
            f"the {needs.process}'s namespace {needs.namespace!r} does not exist",
            needs.namespace_fix,
        )
