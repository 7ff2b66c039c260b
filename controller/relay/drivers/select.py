"""Which driver serves each provider: the real clouds, or the in-process fake for every one.

The cloud SDKs are extras (``wspin[aws]``, ``wspin[oci]``): a missing one is a start-up error
naming the extra, not an ImportError in the middle of a reconcile.
"""

from __future__ import annotations

import importlib.util

from controller.relay.drivers.base import Driver
from controller.relay.drivers.fake import FakeCloud
from wspin.core.clock import utc_now
from wspin.core.errors import ConfigError
from wspin.kube.client import Kube

FAKE_PROVIDERS = ("aws", "oci")


def build_drivers(cloud: str, kube: Kube, namespace: str) -> dict[str, Driver]:
    """``cloud`` "" → the aws and oci drivers; ``fake`` → an in-process cloud per provider."""
    if cloud == "fake":
        return {p: FakeCloud(provider=p, clock=utc_now) for p in FAKE_PROVIDERS}
    if cloud:
        raise ConfigError(f"--relay-cloud: unknown cloud mode {cloud!r}", 'use "" or "fake"')
    for module, extra in (("boto3", "aws"), ("oci", "oci")):
        if importlib.util.find_spec(module) is None:
            raise ConfigError(
                f"the {extra} relay driver needs the {module} package, which is not installed",
                f"install wspin[{extra}], or run with --relay-cloud=fake for a demo",
            )
    from controller.relay.drivers.aws import AwsDriver
    from controller.relay.drivers.oci import OciDriver

    return {"aws": AwsDriver(kube, namespace), "oci": OciDriver(kube, namespace)}
