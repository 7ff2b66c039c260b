"""Fixtures for the installation-level commands (``wspin check``, ``wspin status``).

- ``installed`` -> ``tests.wspin.installation.Installed``: a complete installation on the test
  API server, or the one on the real cluster named by ``WSPIN_TEST_RELEASE*`` when
  ``WSPIN_TEST_KUBECONFIG`` is set (the tests then run unchanged against it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.kubeapi import KubeServer
from tests.wspin.installation import (
    Installed,
    installed_on_real_cluster,
    installed_on_test_server,
)
from wspin.kube.client import Kube


@pytest.fixture
def _test_server(
    real_cluster: bool, _kube_server_url: str | None, request: pytest.FixtureRequest
) -> KubeServer | None:
    """The already started test API server (sync: see ``_kube_server_url``)."""
    if real_cluster:
        return None
    server: KubeServer = request.getfixturevalue("kube_server")
    return server


@pytest.fixture
async def installed(
    kube: Kube, _test_server: KubeServer | None, tmp_path: Path
) -> AsyncIterator[Installed]:
    if _test_server is None:
        yield installed_on_real_cluster()
        return
    async with installed_on_test_server(_test_server, kube, tmp_path / "webhook") as found:
        yield found
