"""agentd's health report in a running workspace pod, mirrored into the Workspace's
``status.secretsDelivery``.

agentd knows what the pod actually applied; the controller only knows what it staged. Its
health endpoint (``GET http://<podIP>:<port>/v1/healthz``, the sidecar's startup-probe path
on the admin port, no credentials) answers JSON carrying two facts the staging pass decides
on: ``relayRevision`` (the handoff revision the running pod applied, the lineage signal of the
rotate escalation) and a degrade code (``relay.degradedReason`` for the relay slice, which
wins, else the top-level ``degradedReason``: a healthy relay slice does not erase another
degrade). They are mirrored as ``status.secretsDelivery.{relayRevision,degradedReason}``,
written only when they change.

Only pods that carry the agentd delivery marker are scraped (``AGENTD_IMAGE_VOLUME=1`` on
the ``workspace`` container: without it there is no agentd to ask), and only once the pod is
Running with an IP. A pod that does not answer, answers non-200 or answers garbage is not an
error on the Workspace: the status keeps what it last said, and the miss is counted in
``wspin_staging_health_scrapes_total{outcome}``. Scrapes are short (2 s) and at most
``concurrency`` run at once across all passes, so a slow fleet cannot tie up the controller.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Final, Literal

import aiohttp
from prometheus_client import CollectorRegistry, Counter

from controller.staging.clients import InternalCallError, PooledSession, read_capped
from controller.types import Obj, ObjectKey, ObjectReader
from wspin.core.contract import AGENTD, MAIN_CONTAINER
from wspin.core.errors import NotFound
from wspin.core.kinds import WORKSPACES
from wspin.kube.client import Kube

HEALTH_PATH: Final = "/v1/healthz"
DEFAULT_PORT: Final = 4098
"""agentd's admin port (the sidecar's startup probe port)."""
TIMEOUT: Final = 2.0
"""A healthy agentd answers in milliseconds; 2 s bounds what a hung pod costs a pass."""
CONCURRENCY: Final = 16
MAX_BODY: Final = 64 * 1024
"""A health report is a few hundred bytes; more is not a health report."""
FIELD_MAX: Final = 256
"""Longest revision or degrade code mirrored; anything longer is cut (the pod is not trusted
to bound what it puts into the Workspace's status)."""

Outcome = Literal["ok", "unreachable", "bad_status", "bad_body"]


@dataclass(frozen=True)
class DeliveryHealth:
    """What the running pod reports; "" for a field it does not report."""

    relay_revision: str = ""
    degraded_reason: str = ""

    def as_status(self) -> dict[str, str]:
        return {"relayRevision": self.relay_revision, "degradedReason": self.degraded_reason}


def scrape_target(pod: Obj | None) -> str | None:
    """The pod's IP when it is worth asking: Running, with an IP, agentd delivered."""
    if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return None
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or not status.get("podIP"):
        return None
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") != MAIN_CONTAINER:
            continue
        marker = None
        for env in container.get("env") or []:
            if env.get("name") == AGENTD.marker_env:
                marker = env.get("value")  # the last duplicate wins, as in the kubelet
        return str(status["podIP"]) if marker == "1" else None
    return None


def parse_health(body: bytes) -> DeliveryHealth | None:
    """The report's two fields, or None when the body is not a JSON object."""
    try:
        decoded = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(decoded, dict):
        return None
    relay = decoded.get("relay")
    relay_reason = relay.get("degradedReason") if isinstance(relay, dict) else None
    reason = relay_reason if isinstance(relay_reason, str) and relay_reason else None
    if reason is None:
        top = decoded.get("degradedReason")
        reason = top if isinstance(top, str) else ""
    revision = decoded.get("relayRevision")
    return DeliveryHealth(
        relay_revision=revision[:FIELD_MAX] if isinstance(revision, str) else "",
        degraded_reason=reason[:FIELD_MAX],
    )


def mirrored(ws: Obj) -> DeliveryHealth:
    """What ``status.secretsDelivery`` says now."""
    delivery = (ws.get("status") or {}).get("secretsDelivery") or {}
    return DeliveryHealth(
        relay_revision=str(delivery.get("relayRevision") or ""),
        degraded_reason=str(delivery.get("degradedReason") or ""),
    )


class HealthScraper:
    """Asks agentd in workspace pods for its report; shared by every pass in the process."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        port: int = DEFAULT_PORT,
        timeout: float = TIMEOUT,
        concurrency: int = CONCURRENCY,
    ) -> None:
        self.port = port
        self.session = PooledSession(timeout)
        self._slots = asyncio.Semaphore(concurrency)
        self.scrapes = Counter(
            "wspin_staging_health_scrapes_total",
            "agentd health reads by the relay staging pass, by outcome (ok, unreachable, "
            "bad_status, bad_body); a pod that does not answer is counted here, not reported "
            "on its Workspace.",
            ["outcome"],
            registry=registry,
        )

    async def close(self) -> None:
        await self.session.close()

    async def scrape(self, pod: Obj | None) -> DeliveryHealth | None:
        """The pod's report, or None (not scrapeable, or no usable answer: counted)."""
        address = scrape_target(pod)
        if address is None:
            return None
        host = f"[{address}]" if ":" in address else address
        url = f"http://{host}:{self.port}{HEALTH_PATH}"
        async with self._slots:
            try:
                async with self.session.get().get(url, allow_redirects=False) as response:
                    if response.status != 200:
                        return self._missed("bad_status")
                    body = await read_capped(response, MAX_BODY, "agentd health")
            except InternalCallError:
                return self._missed("bad_body")
            except (aiohttp.ClientError, TimeoutError, OSError):
                return self._missed("unreachable")
        health = parse_health(body)
        if health is None:
            return self._missed("bad_body")
        self.scrapes.labels("ok").inc()
        return health

    def _missed(self, outcome: Outcome) -> DeliveryHealth | None:
        """Count a scrape without a usable answer; its result is always None."""
        self.scrapes.labels(outcome).inc()
        return None


async def mirror_health(kube: Kube, scraper: HealthScraper, pods: ObjectReader, ws: Obj) -> Obj:
    """Scrape agentd in the Workspace's pod and write what it reports into
    ``status.secretsDelivery`` when it changed; the pass then decides on the fresh value."""
    meta, status = ws["metadata"], ws.get("status") or {}
    pod_name = str(status.get("podName") or "")
    pod = pods.get(ObjectKey(meta.get("namespace", ""), pod_name)) if pod_name else None
    health = await scraper.scrape(pod)
    if health is None or health == mirrored(ws):
        return ws
    delivery = {**(status.get("secretsDelivery") or {}), **health.as_status()}
    try:
        await kube.patch(
            WORKSPACES,
            meta["name"],
            {"status": {"secretsDelivery": delivery}},
            meta.get("namespace"),
            sub="status",
        )
    except NotFound:
        return ws
    return {**ws, "status": {**status, "secretsDelivery": delivery}}
