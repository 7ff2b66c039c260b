"""Both wspin processes started for real, every optional part on, and their /metrics read.

The webhook serves a certificate from files and reaches the in-repo API server (its start-up
image-volume probe runs there); the controller runs against the same API server with relay
staging armed against the fake router, the InferenceRelay controller on the fake cloud and
org-status lookups configured, so every metric family either process can register is on its
/metrics.
"""

from __future__ import annotations

import asyncio
import datetime
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from certs.build import issue_serving, new_ca, service_dns_names
from certs.files import write_certificates
from tests.controller.conftest import INTERNAL_TOKEN, CredentialSource, FakeRouter, publish_pub
from tests.controller.process import Controller
from tests.controller.process import clean_env as controller_env
from tests.webhook.process import PINS, free_port
from tests.webhook.process import clean_env as webhook_env
from wspin.kube.client import Kube

SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
}


def sample_names(exposition: str) -> set[str]:
    """Every sample name a family on the page can have, present or not (a labelled counter
    that has not counted yet shows only its HELP and TYPE lines)."""
    names = set()
    for family in text_string_to_metric_families(exposition):
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
    return names


async def get_text(url: str) -> str:
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as http, http.get(url) as response:
        assert response.status == 200, url
        return await response.text()


@asynccontextmanager
async def webhook(folder: Path, kubeconfig: Path, namespace: str) -> AsyncIterator[str]:
    """A running ``wspin webhook`` with API access; yields its /metrics URL."""
    now = datetime.datetime.now(datetime.UTC)
    ca = new_ca(now)
    write_certificates(
        folder, ca, issue_serving(ca, service_dns_names("wspin-webhook", "wspin"), now)
    )
    port, metrics_port = free_port(), free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "wspinctl.cli",
        "webhook",
        *PINS,
        "--host=127.0.0.1",
        f"--port={port}",
        f"--metrics-port={metrics_port}",
        f"--tls-cert-file={folder / 'tls.crt'}",
        f"--tls-key-file={folder / 'tls.key'}",
        f"--kubeconfig={kubeconfig}",
        env={**webhook_env(), "POD_NAMESPACE": namespace},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{metrics_port}"
    try:
        async with asyncio.timeout(30):
            while True:
                assert process.returncode is None, "the webhook exited during start-up"
                try:
                    await get_text(f"{base}/readyz")
                    break
                except (aiohttp.ClientError, AssertionError):
                    await asyncio.sleep(0.05)
        yield f"{base}/metrics"
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@asynccontextmanager
async def controller(
    kube: Kube,
    namespace: str,
    kubeconfig: Path,
    router: FakeRouter,
    credentials: CredentialSource,
) -> AsyncIterator[str]:
    """A running, armed ``wspin controller`` with every optional part; yields /metrics."""
    await publish_pub(kube, namespace)
    process = await Controller.start(
        f"--kubeconfig={kubeconfig}",
        "--health-port=0",
        "--metrics-port=0",
        "--relay-only-key-delivery=true",
        f"--llm-relay-router-url={router.url}",
        f"--llm-relay-namespace={namespace}",
        f"--api-service-url={credentials.url}",
        "--enable-inference-relay=true",
        "--relay-cloud=fake",
        f"--relay-router-url={router.url}",
        "--relay-artifact-url=https://mirror.example.com/relay",
        "--relay-artifact-sha256-amd64=" + "1" * 64,
        "--relay-artifact-sha256-arm64=" + "2" * 64,
        "--relay-cluster-id=test-cluster",
        env=controller_env(POD_NAMESPACE=namespace, LLMSAFESPACES_INTERNAL_TOKEN=INTERNAL_TOKEN),
    )
    try:
        serving = await process.wait_for("serving probes and metrics")
        await process.wait_ready(serving["health_port"])
        yield f"http://127.0.0.1:{serving['metrics_port']}/metrics"
    finally:
        await process.close()
