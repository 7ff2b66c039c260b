"""The Kubernetes client factory: kubeconfig or in-cluster config, one ApiClient per process.

Only modules that talk to the API server import this; the injector and reconcilers' pure
decision functions never do.
"""

from __future__ import annotations

import urllib.request
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from wspin.core.errors import ConfigError

if TYPE_CHECKING:
    from kubernetes_asyncio import client

READ_BUFFER_BYTES = 2**21
"""aiohttp's read buffer for API answers: a watch event may carry an object near etcd's
1.5 MiB request limit."""


async def api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """An ApiClient from ``kubeconfig`` (the ``--kubeconfig`` flag, which reads
    ``$KUBECONFIG``), else the in-cluster config."""
    # Imported here, not at the top: the package takes about a second to load, and command
    # modules import this one while `wspin <command> --help` must answer at once.
    from kubernetes_asyncio import client, config
    from kubernetes_asyncio.config.config_exception import ConfigException

    path = kubeconfig
    configuration = client.Configuration()
    try:
        if path:
            await config.load_kube_config(config_file=path, client_configuration=configuration)
        else:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError) as err:
        where = f"kubeconfig {path!r}" if path else "the in-cluster service account"
        raise ConfigError(
            f"cannot load Kubernetes credentials from {where}: {err}",
            "pass --kubeconfig or set KUBECONFIG, or run in a pod with a service account",
        ) from err
    return new_api_client(configuration)


def new_api_client(configuration: client.Configuration) -> client.ApiClient:
    """An ApiClient for ``configuration`` whose requests consult nothing but it.

    The library's HTTP session trusts the environment, which costs two thread-pool round
    trips per request (``~/.netrc`` read for credentials, the proxy variables parsed anew),
    about a tenth of the controller's CPU while it creates Workspaces, and a ``~/.netrc``
    entry for the API server's host would fail every request beside the bearer token. So the
    session is replaced by one that does neither; the proxy variables (``HTTPS_PROXY``,
    ``NO_PROXY``) are read once here, as client-go reads them, unless the kubeconfig names a
    ``proxy-url``.
    """
    import aiohttp
    from kubernetes_asyncio import client

    api = client.ApiClient(configuration)
    rest = api.rest_client
    library_session = rest.pool_manager
    rest.pool_manager = aiohttp.ClientSession(
        connector=library_session.connector, read_bufsize=READ_BUFFER_BYTES
    )
    library_session.detach()
    proxy = environment_proxy(configuration.host or "")
    if proxy and not rest.proxy:
        rest.proxy = proxy
    return api


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY`` or ``HTTP_PROXY`` by its
    scheme, ``NO_PROXY`` honoured), or None."""
    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)
