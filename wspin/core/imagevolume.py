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


def dry_run_pod_spec(containers: list[dict[str, Any]]) -> dict[str, Any]:
    """The spec of a pod that is only ever created as a server-side dry run, valid under the
    restricted Pod Security Standard: no service account token, never restarted, non-root with
    the default seccomp profile, and every container without capabilities, privilege
    escalation or a writable root. Shared by the image-volume probe and ``wspin check``."""
    hardened = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    return {
        "automountServiceAccountToken": False,
        "restartPolicy": "Never",
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {**container, "securityContext": dict(hardened)} for container in containers
        ],
    }


def probe_pod(namespace: str, image: str) -> dict[str, Any]:
    """A minimal pod mounting ``image`` as an image volume; valid under restricted PSS.

    Its labels match no workspace selector, so the webhook is never asked to inject it.
    """
    spec = dry_run_pod_spec(
        [
            {
                "name": "probe",
                "image": image,
                "command": ["/nonexistent"],
                "resources": {
                    "requests": {"cpu": "1m", "memory": "1Mi"},
                    "limits": {"cpu": "1m", "memory": "8Mi"},
                },
                "volumeMounts": [{"name": PROBE_VOLUME, "mountPath": "/probe", "readOnly": True}],
            }
        ]
    )
    spec["volumes"] = [
        {"name": PROBE_VOLUME, "image": {"reference": image, "pullPolicy": "IfNotPresent"}}
    ]
    return {
        "metadata": {
            "generateName": PROBE_NAME_PREFIX,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "wspin-image-volume-probe"},
        },
        "spec": spec,
    }


def kept_image_volume(pod: dict[str, Any]) -> bool:
    """The returned pod still has the probe's image volume with its reference."""
    for volume in pod.get("spec", {}).get("volumes") or []:
        if volume.get("name") == PROBE_VOLUME:
            return bool((volume.get("image") or {}).get("reference"))
    return False
