"""Zero failed admission requests while the serving certificate and then the CA rotate.

Two webhook replicas (self-managed sources sharing a Lease, the real webhook app) serve a
client that behaves like the API server (``tests.certs.traffic``): it trusts exactly the
caBundle of the MutatingWebhookConfiguration, re-reads it continuously, and sends
AdmissionReviews without pause, both over a keep-alive pool (rebuilt when the bundle changes,
as the API server rebuilds its webhook client) and over a fresh handshake per request.

Time: certificates are issued on a fake clock the test moves forward, starting in the past so
that every certificate is valid in real time for the real handshakes. The authority's
``propagation`` is one fake hour; the test moves the clock past it only once the real
propagation it stands for has happened (the client trusts the new bundle). The old CA leaves
the bundle once both replicas, the Service's endpoints, report serving the new leaf.
"""

from __future__ import annotations

import contextlib
import datetime
import ssl
from collections.abc import Callable

from certs.build import renew_at, signed_by
from certs.store import SecretStore, Stored
from tests.certs.conftest import (
    SECRET,
    Webhooks,
    endpoint_slice,
    handshake,
    replica,
    serve,
)
from tests.certs.traffic import DAY, HOUR, POLICY, ApiServerClient, background
from tests.support.clock import FakeClock
from tests.support.waiting import eventually
from wspin.kube.client import Kube


async def test_leaf_then_ca_rotation_under_load_fails_no_request(
    kube: Kube, namespace: str, webhooks: Webhooks
) -> None:
    clock = FakeClock(datetime.datetime.now(datetime.UTC) - 90 * DAY)
    await endpoint_slice(kube, namespace, {"a": True, "b": True})
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
        await eventually(lambda: served_by_all(lambda s: s.published), "the Secret is in use")
        first = await stored()
        assert first.ca is not None and first.serving is not None
        await eventually(lambda: progress(0), "requests flow")

        # 1. Leaf renewal at two thirds of its lifetime: same CA, new leaf everywhere.
        clock.set(renew_at(first.serving.cert))
        await eventually(
            lambda: served_by_all(lambda s: s.serving != first.serving), "the new leaf serves"
        )
        renewed = await stored()
        assert renewed.ca == first.ca and renewed.bundle == first.bundle
        mark = client.ok
        await eventually(lambda: progress(mark), "requests flow on the renewed leaf")

        # 2. CA rotation at two thirds of the CA's lifetime: old + new CA published first.
        clock.set(renew_at(first.ca.cert))
        await eventually(
            lambda: served_by_all(lambda s: len(s.bundle) == 2 and s.published),
            "both CAs are published",
        )
        rotating = await stored()
        assert rotating.serving == renewed.serving  # the leaf has not switched yet
        await eventually(lambda: client.bundle == rotating.bundle_pem, "the client trusts both")
        mark = client.ok
        await eventually(lambda: progress(mark), "requests flow while both CAs are trusted")

        # 3. After propagation the leaf switches to the new CA, on every replica.
        clock.advance(HOUR)
        await eventually(
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
        await eventually(lambda: progress(mark), "requests flow on the new CA's leaf")

        # 4. Once both replicas report the new leaf, the old CA leaves the bundle.
        clock.advance(HOUR)
        await eventually(
            lambda: served_by_all(lambda s: len(s.bundle) == 1 and s.published),
            "the old CA is dropped",
        )
        final = await stored()
        assert final.ca is not None and final.ca != first.ca
        assert final.bundle == (final.ca.cert,)
        await eventually(lambda: client.bundle == final.bundle_pem, "the client trusts one CA")
        mark = client.ok
        await eventually(lambda: progress(mark), "requests flow after the rotation")

    assert client.failures == []
    assert [len(b.split(b"-----BEGIN")) - 1 for b in client.bundles_seen] == [1, 2, 1]
