"""Admission traffic as the API server sends it, for the rotation tests.

``ApiServerClient`` trusts exactly the caBundle of the MutatingWebhookConfiguration, re-reads
it continuously (and trusts a change ``LAG`` later, like an API server's informer and client
cache), and sends real AdmissionReviews without pause to the replicas that are ready, over a
keep-alive pool or a fresh TLS handshake per request. Every failure is recorded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import ssl
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp

from certs.authority import Policy
from certs.build import service_dns_names
from tests.certs.conftest import (
    NAMESPACE,
    SERVICE,
    SERVICE_HOST,
    Webhooks,
    admission_review,
    trust,
)
from wspin.core.kinds import MUTATING_WEBHOOKS
from wspin.kube.client import Kube

DAY = datetime.timedelta(days=1)
HOUR = datetime.timedelta(hours=1)
# Leaf 100 days, CA 120 days: the leaf renews (day ~67) before the CA rotates (day 80), and
# starting 90 days in the past keeps every certificate issued on the way valid today.
POLICY = Policy(
    dns_names=tuple(service_dns_names(SERVICE, NAMESPACE)),
    ca_lifetime=120 * DAY,
    serving_lifetime=100 * DAY,
    propagation=HOUR,
)
LAG = 0.3
"""Seconds between a caBundle change and the client trusting it (the API server's lag)."""


@dataclass
class ApiServerClient:
    """Sends AdmissionReviews to the replicas, trusting the published caBundle only."""

    kube: Kube
    webhooks: Webhooks
    endpoints: list[tuple[int, Callable[[], bool]]]
    """Each replica's port and readiness: like a Service, only ready replicas get traffic."""
    bundle: bytes = b""
    context: ssl.SSLContext | None = None
    bundles_seen: list[bytes] = field(default_factory=list)
    ok: int = 0
    ok_by_port: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    async def watch_bundle(self) -> None:
        """Re-read the configuration every 10 ms and trust a changed bundle ``LAG`` later,
        as an API server's informer and client cache would (so a certificate served
        before its CA is trusted fails requests here, as it would in a cluster)."""
        pending: tuple[bytes, float] | None = None
        loop = asyncio.get_running_loop()
        while True:
            config = await self.kube.get(MUTATING_WEBHOOKS, self.webhooks.mutating)
            raw = config["webhooks"][0]["clientConfig"].get("caBundle")
            bundle = base64.b64decode(raw) if raw else b""
            if bundle and bundle != self.bundle and (pending is None or pending[0] != bundle):
                pending = (bundle, loop.time() + LAG)
            if pending is not None and loop.time() >= pending[1]:
                self.bundle, self.context = pending[0], trust(pending[0])
                self.bundles_seen.append(pending[0])
                pending = None
            await asyncio.sleep(0.01)

    async def send(self, fresh_handshakes: bool) -> None:
        connector = aiohttp.TCPConnector(force_close=fresh_handshakes)
        async with aiohttp.ClientSession(connector=connector) as session:
            turn = 0
            while True:
                context = self.context
                ready = [port for port, healthy in self.endpoints if healthy()]
                if context is None or not ready:
                    await asyncio.sleep(0.01)
                    continue
                port = ready[turn % len(ready)]
                turn += 1
                try:
                    async with session.post(
                        f"https://127.0.0.1:{port}/mutate-pods?timeout=10s",
                        json=admission_review(),
                        ssl=context,
                        server_hostname=SERVICE_HOST,
                        timeout=aiohttp.ClientTimeout(total=5),
                    ) as response:
                        body = await response.json()
                    if response.status == 200 and body["response"]["allowed"]:
                        self.ok += 1
                        self.ok_by_port[port] += 1
                    else:
                        self.failures.append(f"HTTP {response.status}: {body}")
                except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as err:
                    self.failures.append(f"{type(err).__name__}: {err}")


@contextlib.asynccontextmanager
async def background(*coroutines: Awaitable[None]) -> AsyncIterator[None]:
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                raise result
