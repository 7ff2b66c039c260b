"""Which serving certificate each webhook replica serves, and which replicas take traffic.

A CA rotation may drop the old CA from the caBundle only once every replica the API server
can reach serves a leaf the new CA signed; until then a replica still serving the old leaf
fails every admission request routed to it. So each replica reports the fingerprint of the
leaf it serves, and the Lease holder compares those reports with the replicas that take
traffic before it finishes a rotation.

Where the reports live: one ConfigMap ``<secret>-serving``, one key per replica (its pod
name), the value ``{"fingerprint": <SHA-256 of the leaf>, "reportedAt": <RFC 3339>}``.
Why a ConfigMap, and not each replica's own Lease or Pod annotations:

- RBAC can name one ConfigMap (``resourceNames``), so the grant is get and patch on that
  object alone. A per-replica Lease is named after a generated pod name that no Role can
  list in advance, so every replica would need update on every Lease in the namespace,
  the controller's leader Lease and the certificate authority's own included; patching the
  own Pod would likewise mean patch on every pod in the namespace.
- A replica writes with a JSON merge patch of its own key only: no read-modify-write, so
  replicas reporting at the same moment never conflict.

Which replicas take traffic: the EndpointSlices of the webhook Service (label
``kubernetes.io/service-name``). The API server calls the webhook through that Service, and
the Service routes only to endpoints that are ready (or, when none is, to serving endpoints
that are terminating), so exactly those must report. Self-reported liveness (fresh Lease
renew times, say) would count a replica that runs but takes no traffic and miss one that
is wedged yet still in the endpoints. An endpoint that is not a pod (a hand-made slice with
bare addresses) can never report, so it holds a rotation until it leaves the Service.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes

from wspin.core.errors import AlreadyExists, NotFound
from wspin.core.kinds import CONFIGMAPS, Resource
from wspin.core.objects import Obj
from wspin.kube.client import Kube

ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", kind="EndpointSlice")
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
REPORTS_SUFFIX = "-serving"
"""The reports ConfigMap is named after the certificate Secret: ``<secret>-serving``."""


def reports_name(secret: str) -> str:
    return f"{secret}{REPORTS_SUFFIX}"


def leaf_fingerprint(cert: x509.Certificate) -> str:
    """The full SHA-256 of the certificate (the reports compare it, so no truncation)."""
    return cert.fingerprint(hashes.SHA256()).hex()


@dataclass(frozen=True)
class Replicas:
    """What the Lease holder knows about the replicas when it decides to finish a rotation."""

    taking_traffic: frozenset[str]
    """Pod names (or ``address/<ip>`` for an endpoint that is no pod) the Service routes to."""
    serving: Mapping[str, str]
    """Pod name → fingerprint of the leaf it last reported serving."""
    present: frozenset[str] = frozenset()
    """Every pod any slice lists, ready or not: reports of other pods are stale."""


def lagging(replicas: Replicas, fingerprint: str) -> tuple[str, ...]:
    """The replicas taking traffic that do not report serving ``fingerprint``, sorted."""
    return tuple(
        sorted(r for r in replicas.taking_traffic if replicas.serving.get(r) != fingerprint)
    )


def endpoints_of(slices: list[Obj]) -> tuple[frozenset[str], frozenset[str]]:
    """(taking traffic, present) from EndpointSlices: pod names, or ``address/<ip>``."""
    taking: set[str] = set()
    present: set[str] = set()
    for slice_ in slices:
        for endpoint in slice_.get("endpoints") or []:
            if not isinstance(endpoint, dict):
                continue
            ref = endpoint.get("targetRef") or {}
            if ref.get("kind") == "Pod" and ref.get("name"):
                name = str(ref["name"])
            else:
                name = "address/" + ",".join(map(str, endpoint.get("addresses") or ["?"]))
            present.add(name)
            conditions = endpoint.get("conditions") or {}
            # The EndpointSlice API: a missing ``ready`` means ready; ``serving`` is true for
            # a terminating endpoint that still passes its readiness probe.
            if conditions.get("ready") is not False or conditions.get("serving") is True:
                taking.add(name)
    return frozenset(taking), frozenset(present)


def reports_in(configmap: Obj | None) -> dict[str, str]:
    """Pod name → reported fingerprint; entries that do not parse are left out."""
    found: dict[str, str] = {}
    for pod, raw in ((configmap or {}).get("data") or {}).items():
        try:
            value: Any = json.loads(raw)
        except (TypeError, ValueError):
            continue
        if isinstance(value, dict) and isinstance(value.get("fingerprint"), str):
            found[str(pod)] = value["fingerprint"]
    return found


class ServingReports:
    """The reports ConfigMap and the Service's EndpointSlices, in one namespace."""

    def __init__(self, kube: Kube, namespace: str, configmap: str, service: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.configmap = configmap
        self.service = service

    async def publish(self, pod: str, fingerprint: str, now: datetime.datetime) -> None:
        """Record that ``pod`` serves the leaf ``fingerprint`` (creating the ConfigMap once)."""
        entry = json.dumps(
            {"fingerprint": fingerprint, "reportedAt": now.isoformat()}, sort_keys=True
        )
        try:
            await self._patch_data({pod: entry})
        except NotFound:
            body = {
                "metadata": {
                    "name": self.configmap,
                    "namespace": self.namespace,
                    "labels": {
                        "app.kubernetes.io/managed-by": "wspin",
                        "app.kubernetes.io/component": "webhook",
                    },
                },
                "data": {pod: entry},
            }
            try:
                await self.kube.create(CONFIGMAPS, body, self.namespace)
            except AlreadyExists:  # another replica created it between our two calls
                await self._patch_data({pod: entry})

    async def reported(self, pod: str) -> str | None:
        """The fingerprint ``pod`` has on record, if any."""
        configmap = await self.kube.get_or_none(CONFIGMAPS, self.configmap, self.namespace)
        return reports_in(configmap).get(pod)

    async def replicas(self) -> Replicas:
        """Who takes traffic and what everyone reported; drops reports of pods gone from
        every slice, so the ConfigMap stays as small as the Deployment."""
        listed = await self.kube.list(
            ENDPOINT_SLICES, self.namespace, labels=f"{SERVICE_NAME_LABEL}={self.service}"
        )
        taking, present = endpoints_of(list(listed.get("items") or []))
        configmap = await self.kube.get_or_none(CONFIGMAPS, self.configmap, self.namespace)
        serving = reports_in(configmap)
        stale = [pod for pod in ((configmap or {}).get("data") or {}) if pod not in present]
        if stale and present:
            await self._patch_data(dict.fromkeys(stale))
        return Replicas(taking, serving, present)

    async def _patch_data(self, data: dict[str, str | None]) -> None:
        """Merge ``data`` into the ConfigMap (``None`` deletes a key); NotFound if absent."""
        await self.kube.patch(
            CONFIGMAPS, self.configmap, {"data": data}, self.namespace, patch_type="merge"
        )
