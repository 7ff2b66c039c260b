"""Running ``wspin`` as a separate process, as the tests of its commands do."""

from __future__ import annotations

import asyncio
import os
import socket
import sys

from tests.webhook.conftest import AGENTD_IMAGE, OPENCODE_IMAGE

PINS = [
    f"--agentd-image={AGENTD_IMAGE}",
    "--agentd-binary-sha256-amd64=" + "a" * 64,
    "--agentd-binary-sha256-arm64=" + "b" * 64,
    f"--opencode-image={OPENCODE_IMAGE}",
    "--opencode-binary-sha256-amd64=" + "c" * 64,
    "--opencode-binary-sha256-arm64=" + "d" * 64,
]
"""Delivery flags that need no registry: both images with their pins given."""


def clean_env() -> dict[str, str]:
    """No cluster: no kubeconfig, no service account, no WSPIN_* leaking from the caller."""
    drop = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("WSPIN_")}


async def run_wspin(*args: str, timeout: float = 30) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "wspinctl.cli",
        *args,
        env=clean_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode is not None
    return process.returncode, stderr.decode()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
