"""The image-volume support probe: does this API server keep a pod's image volumes?

With the ``ImageVolume`` feature gate off, kube-apiserver accepts a pod with an image volume
and silently drops the volume and every mount of it; it does so after mutating admission, so
the injector cannot see it (seen on v1.32: the pod strategy drops disabled fields before
validation, and the answer is a success). A pod would then start with the pins in its env and
no binaries. So at start the webhook server-side dry-runs a probe pod with an image volume in
its own namespace and checks that the volume comes back. Nothing is stored and nothing is
pulled.

Only a success answer says anything about the gate. A refusal means the probe pod never got
that far: a ValidatingAdmissionPolicy, a validating webhook or Pod Security admission turned
it down (422 or 403, and the API server's message names the policy or webhook), RBAC forbade
the create, or the API server failed. Reporting any of those as "ImageVolume off" would send
the operator after the wrong problem, so each is named as what it is, and the probe retries
with backoff (a policy is fixed by changing the policy, not by restarting the webhook).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Literal

from prometheus_client import CollectorRegistry, Gauge

from wspin.core.backoff import Backoff
from wspin.core.errors import KubeAPIError
from wspin.core.imagevolume import PROBE_NAME_PREFIX, PROBE_VOLUME, kept_image_volume, probe_pod
from wspin.core.kinds import PODS
from wspin.core.logs import fields
from wspin.kube.client import Kube

# The probe pod itself is shared with `wspin check`, which runs the same dry run.
__all__ = [
    "GATE_OFF_MESSAGE",
    "PROBE_BACKOFF",
    "PROBE_FIX",
    "PROBE_NAME_PREFIX",
    "PROBE_VOLUME",
    "SUPPORTED_METRIC",
    "ImageVolumeGate",
    "ProbeResult",
    "kept_image_volume",
    "probe_image_volume_support",
    "probe_pod",
    "refused_by_policy",
]

log = logging.getLogger(__name__)

SUPPORTED_METRIC = "wspin_webhook_image_volume_supported"

GATE_OFF_MESSAGE = (
    "the API server drops image volumes from new pods: the ImageVolume feature gate is off "
    "(it is on by default from Kubernetes 1.35; on 1.31-1.34 enable ImageVolume on "
    "kube-apiserver and kubelet); workspace pods would start without their binaries, so the "
    "webhook stays unready"
)
POLICY_FIX = (
    "exempt the probe pod from that policy or webhook: it is a server-side dry run (nothing is "
    "stored or pulled) created by the webhook's service account in its own namespace, "
    "labelled app.kubernetes.io/name=wspin-image-volume-probe; or, on a cluster known to "
    "keep image volumes, pass --skip-image-volume-probe (Helm: webhook.skipImageVolumeProbe)"
)
PROBE_FIX = (
    "let the webhook's service account create pods in its own namespace (the probe is a "
    "dry run: nothing is stored or pulled) and let policy webhooks admit the probe pod, or, "
    "on a cluster known to keep image volumes, pass --skip-image-volume-probe "
    "(Helm: webhook.skipImageVolumeProbe)"
)


ProbeVerdict = Literal["supported", "dropped", "refused-by-policy", "failed"]

# How kube-apiserver words an admission refusal (staging/src/k8s.io/apiserver, v1.32):
# ValidatingAdmissionPolicy "ValidatingAdmissionPolicy '<policy>' with binding '<binding>'
# denied request: …" (422 Invalid unless the validation sets another reason), a webhook
# "admission webhook "<name>" denied the request: …" (403 unless it sets a code), Pod
# Security admission "violates PodSecurity "<level>:<version>": …" (403).
_POLICY_MARKERS = (
    "ValidatingAdmissionPolicy '",
    'admission webhook "',
    "violates PodSecurity",
)


@dataclass(frozen=True)
class ProbeResult:
    """What one probe run found."""

    outcome: ProbeVerdict
    detail: str = ""
    """The API server's own words, for ``refused-by-policy`` and ``failed``."""
    fix: str = ""

    @property
    def definitive(self) -> bool:
        """The API server answered about image volumes; retrying cannot change it."""
        return self.outcome in ("supported", "dropped")

    @property
    def problem(self) -> str | None:
        """The readiness reason, or None when image volumes are supported."""
        if self.outcome == "supported":
            return None
        if self.outcome == "dropped":
            return (
                "the API server drops image volumes: enable the ImageVolume feature gate "
                "(on by default from Kubernetes 1.35)"
            )
        if self.outcome == "refused-by-policy":
            return (
                "an admission policy refused the image-volume probe pod (this says nothing "
                f"about the ImageVolume gate): {self.detail}"
            )
        return f"image-volume support probe failed: {self.detail}"


def refused_by_policy(err: KubeAPIError) -> bool:
    """The API server answered that an admission policy or webhook refused the pod."""
    return 400 <= err.status < 500 and any(marker in err.message for marker in _POLICY_MARKERS)


async def probe_image_volume_support(kube: Kube, namespace: str, image: str) -> ProbeResult:
    """Dry-run create the probe pod once and say what that showed.

    Logs one line saying which outcome it was: info when supported, an error when the volume
    was dropped, a warning naming the policy or the API error otherwise.
    """
    try:
        returned = await kube.create(PODS, probe_pod(namespace, image), namespace, dry_run=True)
    except KubeAPIError as err:
        if refused_by_policy(err):
            result = ProbeResult("refused-by-policy", err.message, POLICY_FIX)
            log.warning(
                "an admission policy refused the image-volume probe pod; the ImageVolume gate "
                "is not known yet",
                extra=fields(namespace=namespace, api_error=err.message, fix=POLICY_FIX),
            )
        else:
            result = ProbeResult("failed", err.message, PROBE_FIX)
            log.warning(
                "image-volume probe could not run",
                extra=fields(
                    namespace=namespace, status=err.status, api_error=err.message, fix=PROBE_FIX
                ),
            )
        return result
    if kept_image_volume(returned):
        log.info("image volumes supported", extra=fields(namespace=namespace))
        return ProbeResult("supported")
    log.error(GATE_OFF_MESSAGE, extra=fields(namespace=namespace, feature_gate="ImageVolume"))
    return ProbeResult("dropped")


PROBE_BACKOFF: Final = Backoff(5.0, 300.0)
"""Seconds between probe attempts that gave no definitive answer, doubling: the first retry
comes soon (a policy webhook that is itself still starting, say), and at most five minutes
apart: a refusing policy is fixed by a person, and readiness should follow within minutes of
the fix without the probe loading the API server meanwhile."""


class ImageVolumeGate:
    """The probe's verdict as a readiness check (pending, supported, or why not) and as
    ``wspin_webhook_image_volume_supported`` on ``registry``: 1 when a dry-run pod kept its
    image volume, 0 when the API server dropped it, absent until a definitive answer."""

    def __init__(
        self,
        required: bool,
        backoff: Backoff = PROBE_BACKOFF,
        *,
        registry: CollectorRegistry,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._supported = Gauge(
            SUPPORTED_METRIC,
            "1 when a dry-run pod kept its image volume (ImageVolume feature gate on), 0 when "
            "the API server dropped or refused it; absent until the probe has run.",
            registry=None,
        )
        self.problem: str | None = (
            "image-volume support probe has not run yet" if required else None
        )
        self.backoff = backoff
        self.result: ProbeResult | None = None
        """The last attempt's result (None before the first)."""
        self._sleep = sleep
        self._registry = registry
        self._registered = False

    def check(self) -> str | None:
        return self.problem

    async def run(self, kube: Kube, namespace: str, image: str) -> None:
        """Probe until the API server answers about image volumes (supported or dropped)."""
        for delay in self.backoff.delays():
            result = await probe_image_volume_support(kube, namespace, image)
            self.result = result
            if result.definitive:
                self.problem = result.problem
                self._supported.set(1 if result.outcome == "supported" else 0)
                if not self._registered:
                    self._registry.register(self._supported)
                    self._registered = True
                return
            self.problem = f"{result.problem}; retrying in {delay:g} s"
            log.info(
                "image-volume probe will retry",
                extra=fields(outcome=result.outcome, retryIn=delay),
            )
            await self._sleep(delay)
        raise AssertionError("Backoff.delays() is endless")
