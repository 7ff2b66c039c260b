"""Zero failed admission requests while the serving certificate and then the CA rotate.

Two webhook replicas (self-managed sources sharing a Lease, the real webhook app) serve a
client that behaves like the API server: it trusts exactly the caBundle of the
MutatingWebhookConfiguration, re-reads it continuously, and sends AdmissionReviews without
pause, both over a keep-alive pool (rebuilt when the bundle changes, as the API server
rebuilds its webhook client) and over a fresh handshake per request.

Time: certificates are issued on a fake clock the test moves forward, starting in the past so
that every certificate is valid in real time for the real handshakes. The authority's
``propagation`` is one fake hour; the test moves the clock past it only once the real
propagation it stands for has happened (the client trusts the new bundle; both replicas
serve the new leaf), which is exactly the assumption ``propagation`` encodes.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp

from certs.authority import Policy
from certs.build import renew_at, service_dns_names, signed_by
from certs.store import SecretStore, Stored
from tests.certs.conftest import (
    NAMESPACE,
    SECRET,
    SERVICE,
    SERVICE_HOST,
    FakeClock,
    Webhooks,
    admission_review,
    handshake,
    replica,
    serve,
    trust,
)
from wspin.resources import MUTATING_WEBHOOKS, Kube

LAG = 0.3
"""Seconds between a caBundle change and the client trusting it (the API server's lag)."""
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
                    else:
                        self.failures.append(f"HTTP {response.status}: {body}")
                except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as err:
                    self.failures.append(f"{type(err).__name__}: {err}")


async def until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    try:
        async with asyncio.timeout(15):
            while not await condition():
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting until {what}") from None


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


async def test_leaf_then_ca_rotation_under_load_fails_no_request(
    kube: Kube, namespace: str, webhooks: Webhooks
) -> None:
    clock = FakeClock(datetime.datetime.now(datetime.UTC) - 90 * DAY)
    store = SecretStore(kube, namespace, SECRET)
    sources = [
        replica(kube, namespace, webhooks, name, policy=POLICY, clock=clock) for name in ("a", "b")
    ]

    async def stored() -> Stored:
        return await store.read()

    async def served_by_all(check: Callable[[Stored], bool]) -> bool:
        """The Secret satisfies ``check`` and every replica hands out its leaf."""
        state = await stored()
        if not check(state) or state.serving is None:
            return False
        for port, _ in client.endpoints:
            try:
                if await handshake(port, state.bundle_pem) != state.serving.cert:
                    return False
            except (OSError, ssl.SSLError):  # not loaded yet
                return False
        return True

    async def progress(since: int) -> bool:
        return client.ok >= since + 20

    async with contextlib.AsyncExitStack() as stack:
        ports = [await stack.enter_async_context(serve(s)) for s in sources]
        client = ApiServerClient(
            kube, webhooks, [(port, s.healthy) for port, s in zip(ports, sources, strict=True)]
        )
        await stack.enter_async_context(background(*(s.run() for s in sources)))
        await stack.enter_async_context(
            background(client.watch_bundle(), client.send(False), client.send(True))
        )

        # Steady state: one CA, published; both replicas serve its leaf.
        await until(lambda: served_by_all(lambda s: s.published), "the Secret is in use")
        first = await stored()
        assert first.ca is not None and first.serving is not None
        await until(lambda: progress(0), "requests flow")

        # 1. Leaf renewal at two thirds of its lifetime: same CA, new leaf everywhere.
        clock.now = renew_at(first.serving.cert)
        await until(
            lambda: served_by_all(lambda s: s.serving != first.serving), "the new leaf serves"
        )
        renewed = await stored()
        assert renewed.ca == first.ca and renewed.bundle == first.bundle
        mark = client.ok
        await until(lambda: progress(mark), "requests flow on the renewed leaf")

        # 2. CA rotation at two thirds of the CA's lifetime: old + new CA published first.
        clock.now = renew_at(first.ca.cert)
        await until(
            lambda: served_by_all(lambda s: len(s.bundle) == 2 and s.published),
            "both CAs are published",
        )
        rotating = await stored()
        assert rotating.serving == renewed.serving  # the leaf has not switched yet
        await until(
            lambda: asyncio.sleep(0, client.bundle == rotating.bundle_pem), "the client trusts both"
        )
        mark = client.ok
        await until(lambda: progress(mark), "requests flow while both CAs are trusted")

        # 3. After propagation the leaf switches to the new CA, on every replica.
        clock.advance(HOUR)
        await until(
            lambda: served_by_all(
                lambda s: (
                    s.ca is not None
                    and s.serving is not None
                    and signed_by(s.serving.cert, s.ca.cert)
                    and len(s.bundle) == 2
                )
            ),
            "the new CA's leaf serves",
        )
        mark = client.ok
        await until(lambda: progress(mark), "requests flow on the new CA's leaf")

        # 4. After propagation again the old CA leaves the bundle.
        clock.advance(HOUR)
        await until(
            lambda: served_by_all(lambda s: len(s.bundle) == 1 and s.published),
            "the old CA is dropped",
        )
        final = await stored()
        assert final.ca is not None and final.ca != first.ca
        assert final.bundle == (final.ca.cert,)
        await until(
            lambda: asyncio.sleep(0, client.bundle == final.bundle_pem), "the client trusts one CA"
        )
        mark = client.ok
        await until(lambda: progress(mark), "requests flow after the rotation")

    assert client.failures == []
    assert [len(b.split(b"-----BEGIN")) - 1 for b in client.bundles_seen] == [1, 2, 1]
