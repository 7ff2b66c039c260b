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
from typing import Any

from prometheus_client import Gauge

from wspin.logs import fields
from wspin.resources import PODS, Invalid, Kube, KubeAPIError

log = logging.getLogger(__name__)

IMAGE_VOLUME_SUPPORTED = Gauge(
    "wspin_webhook_image_volume_supported",
    "1 when a dry-run pod kept its image volume (ImageVolume feature gate on), 0 when the "
    "API server dropped or refused it; absent until the probe has run.",
)

PROBE_VOLUME = "wspin-image-volume-probe"
PROBE_NAME_PREFIX = "wspin-image-volume-probe-"
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


def probe_pod(namespace: str, image: str) -> dict[str, Any]:
    """A minimal pod mounting ``image`` as an image volume; valid under restricted PSS.

    Its labels match no workspace selector, so this webhook is never asked to inject it.
    """
    return {
        "metadata": {
            "generateName": PROBE_NAME_PREFIX,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "wspin-image-volume-probe"},
        },
        "spec": {
            "automountServiceAccountToken": False,
            "restartPolicy": "Never",
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65532,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "probe",
                    "image": image,
                    "command": ["/nonexistent"],
                    "resources": {
                        "requests": {"cpu": "1m", "memory": "1Mi"},
                        "limits": {"cpu": "1m", "memory": "8Mi"},
                    },
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                        "readOnlyRootFilesystem": True,
                    },
                    "volumeMounts": [
                        {"name": PROBE_VOLUME, "mountPath": "/probe", "readOnly": True}
                    ],
                }
            ],
            "volumes": [
                {
                    "name": PROBE_VOLUME,
                    "image": {"reference": image, "pullPolicy": "IfNotPresent"},
                }
            ],
        },
    }


def kept_image_volume(pod: dict[str, Any]) -> bool:
    """The returned pod still has the probe's image volume with its reference."""
    for volume in pod.get("spec", {}).get("volumes") or []:
        if volume.get("name") == PROBE_VOLUME:
            return bool((volume.get("image") or {}).get("reference"))
    return False


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
