"""The Kubernetes client factory: kubeconfig or in-cluster config, one ApiClient per process.

Only modules that talk to the API server import this; the injector and reconcilers' pure
decision functions never do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wspin.core.errors import ConfigError

if TYPE_CHECKING:
    from kubernetes_asyncio import client


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
    return client.ApiClient(configuration)
