"""Fixtures for the installation-level commands (``wspin check``, ``wspin status``).

- ``installed`` -> ``tests.wspinctl.installation.Installed``: a complete installation on the test
  API server; on the control plane the session starts from ``KUBEBUILDER_ASSETS``, one of
  its own in a fresh namespace (webhook served in-process, called on loopback); on a cluster
  ``WSPIN_TEST_KUBECONFIG`` names, the one there named by ``WSPIN_TEST_RELEASE*`` (the tests
  then run unchanged against it; they skip, saying so, on a cluster with no installation).
- ``breaks_installation`` (use with ``pytest.mark.usefixtures``): the test breaks or rolls out
  the installation on purpose, so it skips on an installation it did not build.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.kubeapi import KubeServer
from tests.support.apiserver import ControlPlane
from tests.wspinctl.installation import (
    Installed,
    installed_on_control_plane,
    installed_on_real_cluster,
    installed_on_test_server,
)
from wspin.core.kinds import DEPLOYMENTS
from wspin.kube.client import Kube


@pytest.fixture
async def installed(
    kube: Kube,
    _test_server: KubeServer | None,
    _control_plane: ControlPlane | None,
    tmp_path: Path,
) -> AsyncIterator[Installed]:
    if _control_plane is not None:
        async with installed_on_control_plane(kube, tmp_path / "webhook") as found:
            yield found
        return
    if _test_server is None:
        found = installed_on_real_cluster()
        if (
            await kube.get_or_none(DEPLOYMENTS, found.install.webhook, found.install.namespace)
            is None
        ):
            pytest.skip(
                f"needs wspin installed on the cluster (no Deployment {found.install.webhook} in "
                f"namespace {found.install.namespace}; WSPIN_TEST_RELEASE and "
                "WSPIN_TEST_RELEASE_NAMESPACE name the release): an installation runs pods and "
                "is reached through its Service, which a control plane without a kubelet, "
                "kube-proxy or DNS cannot do"
            )
        yield found
        return
    async with installed_on_test_server(_test_server, kube, tmp_path / "webhook") as found:
        yield found


@pytest.fixture
def breaks_installation(installed: Installed) -> None:
    if installed.route is None:
        pytest.skip(
            "breaks or rolls out the installation on purpose: only one the test builds (the "
            "test API server's, or the one on the control plane the session starts), never "
            "one already running on the cluster"
        )
