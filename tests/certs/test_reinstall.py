"""``helm uninstall`` then ``helm install`` again, with ``wspin webhook`` as real processes in
self-managed mode: the old replica hands its Lease over when it stops; the new one, started
while the configurations are gone and the Lease is still held by a replica that could not
release it, is unready until the re-created configurations carry its CA, and fills them at
once instead of waiting for that Lease."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
import yaml

from certs.store import SecretStore
from tests.certs.conftest import (
    SECRET,
    SERVICE,
    Webhooks,
    create_configurations,
    delete_configurations,
    hold_the_lease_for_a_replica_that_is_gone,
    published_bundle,
)
from tests.conftest import KUBECONFIG_ENV
from tests.support.waiting import eventually
from tests.webhook.process import PINS, clean_env, free_port
from wspin.core.kinds import LEASES
from wspin.kube.client import Kube


@pytest.fixture
def kubeconfig(real_cluster: bool, request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if real_cluster:
        return Path(os.environ[KUBECONFIG_ENV])
    url = request.getfixturevalue("kube_server").url
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": url}}],
                "users": [{"name": "test", "user": {"token": "test-token"}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                "current-context": "test",
            }
        )
    )
    return path


@dataclass
class Replica:
    process: asyncio.subprocess.Process
    metrics_port: int
    lines: list[str] = field(default_factory=list)

    async def readyz(self) -> tuple[int, str]:
        url = f"http://127.0.0.1:{self.metrics_port}/readyz"
        try:
            async with aiohttp.ClientSession() as http, http.get(url) as reply:
                return reply.status, await reply.text()
        except aiohttp.ClientConnectionError:
            return 0, "not listening yet"


@asynccontextmanager
async def webhook_replica(
    kubeconfig: Path, namespace: str, webhooks: Webhooks, pod: str
) -> AsyncIterator[Replica]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "wspinctl.cli",
        "webhook",
        *PINS,
        "--host=127.0.0.1",
        f"--port={free_port()}",
        f"--metrics-port={(metrics_port := free_port())}",
        f"--kubeconfig={kubeconfig}",
        "--skip-image-volume-probe",
        "--self-managed-certs",
        f"--secret={SECRET}",
        f"--service-name={SERVICE}",
        f"--mutating-webhook-name={webhooks.mutating}",
        f"--validating-webhook-name={webhooks.validating}",
        "--shutdown-delay=3",
        env={**clean_env(), "POD_NAMESPACE": namespace, "POD_NAME": pod},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    replica = Replica(process, metrics_port)

    async def read() -> None:
        assert process.stderr is not None
        async for raw in process.stderr:
            replica.lines.append(raw.decode(errors="replace"))

    reader = asyncio.create_task(read())
    try:
        yield replica
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        await reader


async def test_a_reinstalled_webhook_is_ready_once_its_ca_is_published_without_waiting_for_a_lease(
    kube: Kube, namespace: str, webhooks: Webhooks, kubeconfig: Path
) -> None:
    lease_name = f"{SECRET}-authority"
    async with webhook_replica(kubeconfig, namespace, webhooks, "old") as old:
        await eventually(lambda: _status(old, 200), "the first replica ready", timeout=30)
        holder = (await kube.get(LEASES, lease_name, namespace))["spec"]["holderIdentity"]
        assert holder
        old.process.send_signal(signal.SIGTERM)

        async def released() -> bool:
            lease = await kube.get(LEASES, lease_name, namespace)
            return not lease["spec"].get("holderIdentity")

        # Handed over at once, during the shutdown delay, not after the drain.
        await eventually(released, "the Lease released")
        assert old.process.returncode is None
        assert await asyncio.wait_for(old.process.wait(), 20) == 0
    stored = await SecretStore(kube, namespace, SECRET).read()
    assert stored.published

    # The uninstall: configurations gone, and (as when the RBAC went first) a Lease that the
    # replica holding it could not release.
    await delete_configurations(kube, webhooks)
    await hold_the_lease_for_a_replica_that_is_gone(kube, namespace)
    async with webhook_replica(kubeconfig, namespace, webhooks, "new") as new:
        # Serving its certificate, yet unready: the API server could not verify it.
        missing = f"{webhooks.mutating}: not found"
        await eventually(lambda: _only_problem_is_the_ca_bundle(new, missing), timeout=30)
        await create_configurations(kube, webhooks)  # the re-install
        await eventually(lambda: _status(new, 200), "ready after the re-install")
        assert await published_bundle(kube, webhooks) == [stored.bundle_pem] * 3
        lease = await kube.get(LEASES, lease_name, namespace)
        assert lease["spec"]["holderIdentity"] == "wspin-webhook-6d9f-gone_0badcafe"
        new.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(new.process.wait(), 20) == 0
    # Every line both replicas printed, start to shutdown, is one JSON object.
    for line in old.lines + new.lines:
        assert isinstance(json.loads(line), dict), line
    assert any("caBundle filled from the published Secret" in line for line in new.lines)


async def _status(replica: Replica, expected: int) -> bool:
    assert replica.process.returncode is None, "".join(replica.lines[-20:])
    return (await replica.readyz())[0] == expected


async def _only_problem_is_the_ca_bundle(replica: Replica, saying: str) -> bool:
    assert replica.process.returncode is None, "".join(replica.lines[-20:])
    status, body = await replica.readyz()
    problems = body.splitlines()[1:]
    return (
        status == 503
        and [p.split(":")[0] for p in problems] == ["ca-bundle"]
        and saying in problems[0]
    )
