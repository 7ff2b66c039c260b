"""Fixtures for the installation-level commands (``wspin check``, ``wspin status``).

- ``installed`` -> ``tests.wspin.installation.Installed``: a complete installation on the test
  API server, or the one on the real cluster named by ``WSPIN_TEST_RELEASE*`` when
  ``WSPIN_TEST_KUBECONFIG`` is set (the tests then run unchanged against it).
- ``kubeconfig`` -> Path: a kubeconfig file for the same API server, for the console script.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import KUBECONFIG_ENV
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


@pytest.fixture
def kubeconfig(_test_server: KubeServer | None, tmp_path: Path) -> Path:
    if _test_server is None:
        return Path(os.environ[KUBECONFIG_ENV])
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": _test_server.url}}],
                "users": [{"name": "test", "user": {"token": "test-token"}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                "current-context": "test",
            }
        )
    )
    return path
