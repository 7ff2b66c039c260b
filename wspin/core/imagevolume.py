"""The image-volume probe pod: does an API server keep a pod's image volumes?

With the ``ImageVolume`` feature gate off (the default before Kubernetes 1.35), kube-apiserver
accepts a pod with an image volume and silently drops the volume and every mount of it, after
mutating admission (seen on v1.32). A server-side dry run of this pod shows which it is:
nothing is stored and nothing is pulled. The webhook runs it at start (and stays unready when
the volume is dropped); ``wspin check`` runs the same pod to report it.

Pure data, no I/O.
"""

from __future__ import annotations

from typing import Any

PROBE_VOLUME = "wspin-image-volume-probe"
PROBE_NAME_PREFIX = "wspin-image-volume-probe-"


def probe_pod(namespace: str, image: str) -> dict[str, Any]:
    """A minimal pod mounting ``image`` as an image volume; valid under restricted PSS.

    Its labels match no workspace selector, so the webhook is never asked to inject it.
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
