"""The image-volume support probe: does this API server keep a pod's image volumes?

With the ``ImageVolume`` feature gate off, kube-apiserver accepts a pod with an image volume
and silently drops the volume and every mount of it; it does so after mutating admission, so
the injector cannot see it (seen on v1.32, /work fixtures README "ImageVolume experiments").
A pod would then start with the pins in its env and no binaries. So at start the webhook
server-side dry-runs a probe pod with an image volume in its own namespace and checks that the
volume comes back. Nothing is stored and nothing is pulled.
"""

from __future__ import annotations

import logging

from prometheus_client import Gauge

from wspin.imagevolume import PROBE_NAME_PREFIX, PROBE_VOLUME, kept_image_volume, probe_pod
from wspin.logs import fields
from wspin.resources import PODS, Invalid, Kube, KubeAPIError

__all__ = [
    "GATE_OFF_MESSAGE",
    "IMAGE_VOLUME_SUPPORTED",
    "PROBE_FIX",
    "PROBE_NAME_PREFIX",
    "PROBE_VOLUME",
    "kept_image_volume",
    "probe_image_volume_support",
    "probe_pod",
]

log = logging.getLogger(__name__)

IMAGE_VOLUME_SUPPORTED = Gauge(
    "wspin_webhook_image_volume_supported",
    "1 when a dry-run pod kept its image volume (ImageVolume feature gate on), 0 when the "
    "API server dropped or refused it; absent until the probe has run.",
)

GATE_OFF_MESSAGE = (
    "the API server drops image volumes from new pods: the ImageVolume feature gate is off "
    "(it is on by default from Kubernetes 1.35; on 1.31-1.34 enable ImageVolume on "
    "kube-apiserver and kubelet); workspace pods would start without their binaries, so the "
    "webhook stays unready"
)
PROBE_FIX = (
    "let the webhook's service account create pods in its own namespace (the probe is a "
    "dry run: nothing is stored or pulled) and let policy webhooks admit the probe pod, or, "
    "on a cluster known to keep image volumes, pass --skip-image-volume-probe "
    "(Helm: webhook.skipImageVolumeProbe)"
)


async def probe_image_volume_support(kube: Kube, namespace: str, image: str) -> bool:
    """Dry-run create the probe pod; True when the image volume survives.

    A ``422 Invalid`` answer also counts as unsupported (an API server that refuses the
    field rather than dropping it). Other API errors (403, transport) propagate as
    ``KubeAPIError`` carrying ``PROBE_FIX``: the probe could not run, which says nothing
    about the gate, and the operator needs to know the way out of an endless retry.
    Sets ``wspin_webhook_image_volume_supported`` and logs one error line when unsupported.
    """
    try:
        returned = await kube.create(PODS, probe_pod(namespace, image), namespace, dry_run=True)
    except Invalid as err:
        IMAGE_VOLUME_SUPPORTED.set(0)
        log.error(
            GATE_OFF_MESSAGE,
            extra=fields(namespace=namespace, feature_gate="ImageVolume", api_error=err.message),
        )
        return False
    except KubeAPIError as err:
        err.fix = PROBE_FIX
        raise
    supported = kept_image_volume(returned)
    IMAGE_VOLUME_SUPPORTED.set(1 if supported else 0)
    if supported:
        log.info("image volumes supported", extra=fields(namespace=namespace))
    else:
        log.error(GATE_OFF_MESSAGE, extra=fields(namespace=namespace, feature_gate="ImageVolume"))
    return supported
