"""Which driver serves each provider: the real clouds, or the in-process fake for every one.

The cloud SDKs are extras (``wspin[aws]``, ``wspin[oci]``): a missing one is a start-up error
naming the extra, not an ImportError in the middle of a reconcile.
"""

from __future__ import annotations

import importlib.util

from controller.relay.drivers.base import Driver
from controller.relay.drivers.fake import FakeCloud
from controller.relay.drivers.providers import PROVIDERS
from controller.settings import RelayTokenStoreSettings
from wspin.core.clock import utc_now
from wspin.core.errors import ConfigError
from wspin.kube.client import Kube


def check_cloud(cloud: str) -> None:
    """``--relay-cloud`` names a mode this process can run: ``ConfigError`` otherwise (an
    unknown mode, or a cloud SDK that is not installed)."""
    if cloud == "fake":
        return
    if cloud:
        raise ConfigError(f"--relay-cloud: unknown cloud mode {cloud!r}", 'use "" or "fake"')
    for provider in PROVIDERS.values():
        if importlib.util.find_spec(provider.sdk) is None:
            raise ConfigError(
                f"the {provider.name} relay driver needs the {provider.sdk} package, which is "
                "not installed",
                f"install wspin[{provider.extra}], or run with --relay-cloud=fake for a demo",
            )


def build_drivers(
    cloud: str,
    kube: Kube,
    namespace: str,
    store: RelayTokenStoreSettings | None = None,
) -> dict[str, Driver]:
    """``cloud`` "" → each registered provider's driver, storing VM tokens where ``store``
    says; ``fake`` → an in-process cloud per provider."""
    check_cloud(cloud)
    if cloud == "fake":
        return {name: FakeCloud(provider=name, clock=utc_now) for name in PROVIDERS}
    return {
        name: provider.driver(kube, namespace, provider, store or RelayTokenStoreSettings())
        for name, provider in PROVIDERS.items()
    }
