"""The shared fixtures in ``tests/conftest.py``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.kubeapi import KubeServer
from wspin.core.kinds import NAMESPACES
from wspin.kube.client import Kube

REPO = Path(__file__).resolve().parents[2]


async def test_namespace_fixture_gives_a_fresh_active_namespace(kube: Kube, namespace: str) -> None:
    created = await kube.get(NAMESPACES, namespace)
    assert created["status"]["phase"] == "Active"
    assert namespace.startswith("wspin-test-")


async def test_kube_api_talks_to_the_kube_server(kube_server: KubeServer, kube: Kube) -> None:
    assert kube.api.configuration.host == kube_server.url
    assert kube_server.url.startswith("http://127.0.0.1:")


def test_leftover_asyncio_tasks_fail_async_tests_only(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import _asyncio_task_leak_check, _no_asyncio_pending_tasks\n"
        "__all__ = ['_asyncio_task_leak_check', '_no_asyncio_pending_tasks']\n"
    )
    (tmp_path / "test_leaks.py").write_text(
        textwrap.dedent(
            """
            import asyncio

            async def test_leaks_a_task():
                asyncio.get_running_loop().create_task(asyncio.sleep(60))

            async def test_cleans_up():
                task = asyncio.get_running_loop().create_task(asyncio.sleep(60))
                task.cancel()

            def test_sync():
                assert True
            """
        )
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "asyncio_mode=auto",
            "-o",
            "asyncio_default_fixture_loop_scope=function",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
        check=False,
    )
    assert "3 passed, 1 error" in result.stdout, result.stdout
    assert "ERROR test_leaks.py::test_leaks_a_task - Failed: the test left" in result.stdout
    assert "coro=<sleep() running" in result.stdout
