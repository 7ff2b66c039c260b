"""``wspin webhook``: resolve everything first, then serve, until SIGTERM.

Start order, and why:
0. With API access, the API server is checked (reachable, our credentials accepted, our
   namespace there, every watched resource served and listable): one line naming the fix.
1. Pins for both artifacts (flags, registry, or the same-digest cache): an unresolvable
   configuration exits 1 before a socket is opened, so a broken release never looks healthy.
2. The certificate source: the HTTPS listener needs its context.
3. The plain-HTTP side server (/healthz, /readyz, /metrics) and the HTTPS admission server.
4. Background work: certificate reload/renewal and the image-volume support probe; /readyz
   stays 503 with the reason until the certificate is loaded, the webhook configurations carry
   its CA (self-managed mode: before that the API server refuses it) and the probe has passed.
Shutdown runs in reverse: the certificate work stops first, handing its Lease over at once
(while an uninstall has most likely not yet deleted the RBAC that allows it, and so that a
successor need not wait for the Lease to expire); both ports stop accepting, answer requests
already arriving (their connections close after the answer) and abort every connection left
after ``--drain-timeout``, so a client that stopped reading cannot hold the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from certs.metrics import CertificateMetrics
from certs.source import certificate_source
from webhook.app import make_app
from webhook.imagevolume_probe import ImageVolumeGate
from webhook.inject import InjectConfig
from webhook.metrics import AdmissionMetrics
from webhook.pins import resolve_artifact
from webhook.settings import WebhookSettings
from webhook.watches import watched_resources, watched_views
from wspin.core.delivery import ResolvedArtifact
from wspin.core.logs import fields, hold_lines_per_turn
from wspin.http import server as http
from wspin.http.metrics import ServerCollector
from wspin.http.probes import Readiness, process_registry, side_routes
from wspin.kube.client import Kube
from wspin.kube.config import api_client
from wspin.kube.preflight import StartNeeds, check_api_server

log = logging.getLogger("wspin.webhook")

PIN_RESOLUTION_TIMEOUT = 30.0
"""Seconds for each artifact's registry read at start: long enough for a slow registry's
token exchange and redirects, short enough that a broken one fails the rollout visibly."""
GC_GEN0_THRESHOLD = 50_000
"""Allocations between young-generation collections (Python's default is 700; one decoded
review allocates a few thousand objects)."""


def has_api_access(settings: WebhookSettings) -> bool:
    """A kubeconfig was given, or this runs in a pod with a service account."""
    return bool(settings.kubeconfig or settings.in_cluster)


@contextlib.asynccontextmanager
async def kube_client(settings: WebhookSettings) -> AsyncIterator[Kube | None]:
    if not has_api_access(settings):
        yield None
        return
    api = await api_client(settings.kubeconfig)
    try:
        kube = Kube(api)
        await check_api_server(kube, start_needs(settings))
        yield kube
    finally:
        await api.close()


def start_needs(settings: WebhookSettings) -> StartNeeds:
    """What the webhook needs of the API server before it starts (``check_api_server``)."""
    return StartNeeds(
        process="webhook",
        namespace=settings.namespace,
        namespace_fix="set POD_NAMESPACE to the namespace the webhook runs in (the chart sets "
        "it to the release namespace, helm install -n NAMESPACE) and create it first",
        watched=watched_resources(
            settings.tenant_quota, settings.validator.max_workspaces_per_member
        ),
        rbac_fix="install the chart's webhook ClusterRole and binding (list and watch on "
        "runtimeenvironments and namespaces, and pods with webhook.tenantQuota) for the "
        "webhook's ServiceAccount",
        credentials_fix="point --kubeconfig (or KUBECONFIG) at the cluster, or run in a pod "
        "whose ServiceAccount token the API server accepts",
    )


async def resolve_both(
    settings: WebhookSettings, kube: Kube | None, namespace: str
) -> InjectConfig:
    """Resolve agentd and opencode pins; ConfigError (exit 1) names the artifact and the fix."""
    resolved: list[ResolvedArtifact] = []
    async with aiohttp.ClientSession() as session:
        for delivery in (settings.agentd, settings.opencode):
            artifact = await resolve_artifact(
                delivery,
                kube=kube,
                namespace=namespace,
                insecure_registries=settings.insecure_registries,
                session=session,
                timeout=PIN_RESOLUTION_TIMEOUT,
            )
            resolved.append(artifact)  # resolve_artifact logs the source
    return InjectConfig(agentd=resolved[0], opencode=resolved[1])


def tune_gc_for_admission() -> None:
    """Make the cyclic garbage collector cheap for admission traffic.

    Each review decodes into thousands of short-lived, acyclic objects that reference counting
    frees; with Python's defaults they trigger several collections per request, and the
    oldest generation re-walks the whole start-up heap (the Kubernetes client alone is large).
    Freezing that heap and collecting the youngest generation less often halves the per-review
    cost (``make bench``) without changing what is freed.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, 20, 20)


async def serve(settings: WebhookSettings) -> int:
    namespace = settings.namespace
    async with kube_client(settings) as kube:
        inject_config = await resolve_both(settings, kube, namespace)
        # The process's one metrics registry, served on the metrics port.
        registry = process_registry()
        source = certificate_source(
            settings.certificates, kube, namespace, CertificateMetrics(registry)
        )

        readiness = Readiness()
        readiness.add("certificate", source.problem)  # covers notBefore and notAfter
        readiness.add("ca-bundle", source.trust_problem)  # the API server trusts it
        probing = kube is not None and not settings.skip_image_volume_probe
        if not probing:
            log.info(
                "image-volume support probe off",
                extra=fields(reason="--skip-image-volume-probe" if kube else "no API access"),
            )
        gate = ImageVolumeGate(required=probing, registry=registry)
        readiness.add("image-volume", gate.check)

        certificates = asyncio.create_task(source.run(), name="certificate-source")
        background = [certificates]
        views = None
        if kube is not None:
            views = watched_views(
                kube, settings.tenant_quota, settings.validator.max_workspaces_per_member
            )
            for name, check in views.checks():
                readiness.add(name, check)
            background.append(asyncio.create_task(views.run(), name="watched-views"))
        if probing and kube is not None:
            background.append(
                asyncio.create_task(
                    gate.run(kube, namespace, settings.agentd.image), name="image-volume-probe"
                )
            )

        serving = settings.serving
        app = make_app(
            inject_config,
            settings.validator,
            readiness,
            views,
            settings.tenant_quota,
            metrics=AdmissionMetrics(registry),
        )
        tune_gc_for_admission()  # after start-up: everything allocated so far lives forever
        hold_lines_per_turn(asyncio.get_running_loop())
        servers: list[http.HttpServer] = []
        named: dict[str, http.HttpServer] = {}
        collector = ServerCollector(named)
        registry.register(collector)
        try:
            admission = await http.serve(
                app,
                serving.host,
                serving.port,
                ssl_context=source.ssl_context(),
                limits=serving.limits,
                log=log,
            )
            servers.append(admission)
            named["admission"] = admission
            if serving.metrics_port:
                side = await http.serve(
                    side_routes(readiness, registry),
                    serving.host,
                    serving.metrics_port,
                    limits=serving.limits,
                    log=log,
                )
                servers.append(side)
                named["metrics"] = side
            log.info(
                "webhook serving",
                extra=fields(port=admission.port, metricsPort=serving.metrics_port),
            )
            status = await _until_signalled_or_failed(background)
            log.info("webhook shutting down", extra=fields(exitStatus=status))
            # Its Lease is released while the delay runs (bounded; awaited below). The
            # certificate already loaded keeps being served.
            certificates.cancel()
            if status == 0 and serving.shutdown_delay:
                # Stay reachable while the endpoint is removed; only /readyz changes.
                readiness.add("shutdown", lambda: "shutting down")
                await asyncio.sleep(serving.shutdown_delay)
        finally:
            # Both ports at once: each stops accepting, answers what is arriving, and aborts
            # what is left after the drain deadline.
            await asyncio.gather(*(server.shutdown() for server in servers))
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
    return status


async def _until_signalled_or_failed(background: list[asyncio.Task[None]]) -> int:
    """0 on SIGTERM/SIGINT; 1 if a background task dies (a bug: fail loudly, restart clean)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stopping = asyncio.create_task(stop.wait(), name="signal")
    pending: set[asyncio.Task[Any]] = {stopping, *background}
    try:
        while True:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if stopping in done:
                return 0
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    log.error(
                        "background task failed",
                        exc_info=task.exception(),
                        extra=fields(task=task.get_name()),
                    )
                    return 1
    finally:
        stopping.cancel()
