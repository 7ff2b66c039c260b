"""`helm test` probe: is agentd/opencode delivery injected into a new workspace pod?

Creates a workspace-labelled pod with a server-side dry run (nothing is stored or scheduled) and
checks the pod the API server returns: both image volumes with the configured digest-pinned
images, read-only mounts on the workspace container, and the sha256 pins in its environment.
A dry run passes every admission webhook and the API server's own defaulting, so it also shows
whether the API server keeps image volumes (the ImageVolume feature gate).

Runs inside the wspin image with the standard library only; prints no credential.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import sys
import urllib.error
import urllib.request
from typing import Any

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
HEX64 = re.compile(r"^[0-9a-f]{64}$")
ARTIFACTS = {
    "agentd": ("AGENTD", "/agentd/usr/local/bin/workspace-agentd"),
    "opencode": ("OPENCODE", "/opencode/usr/local/bin/opencode"),
}


def probe_pod(namespace: str, image: str) -> dict[str, Any]:
    """A minimal pod the webhook treats as a workspace pod (labels + a `workspace` container)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "wspin-injection-probe-",
            "namespace": namespace,
            "labels": {
                "app": "llmsafespaces",
                "component": "workspace",
                "llmsafespaces.dev/workspace": "wspin-helm-test",
            },
        },
        "spec": {
            "automountServiceAccountToken": False,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "workspace",
                    "image": image,
                    # The delivered supervisor, as in every workspace pod (the webhook and the
                    # delivery policy refuse any other); a dry run never starts it.
                    "command": [ARTIFACTS["agentd"][1]],
                    "args": ["--supervise"],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


def wiring_problems(pod: dict[str, Any], images: dict[str, str]) -> list[str]:
    """Everything missing from the delivery wiring of `pod`; empty when it is complete."""
    spec = pod.get("spec") or {}
    problems: list[str] = []
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    workspace = next(
        (c for c in spec.get("containers") or [] if c.get("name") == "workspace"), None
    )
    if workspace is None:
        return ["the returned pod has no `workspace` container"]
    mounts = {m.get("name"): m for m in workspace.get("volumeMounts") or []}
    env = {e.get("name"): e.get("value") for e in workspace.get("env") or []}
    for name, (prefix, binary) in ARTIFACTS.items():
        volume = volumes.get(name)
        reference = ((volume or {}).get("image") or {}).get("reference")
        if volume is None:
            problems.append(
                f"volume {name!r} is missing: the webhook did not inject, or the API server "
                "dropped image volumes (ImageVolume feature gate off)"
            )
        elif reference != images[name]:
            problems.append(f"volume {name!r} uses image {reference!r}, expected {images[name]!r}")
        mount = mounts.get(name)
        if mount is None:
            problems.append(f"the workspace container does not mount {name!r} at /{name}")
        elif mount.get("mountPath") != f"/{name}" or not mount.get("readOnly"):
            problems.append(f"the {name!r} mount must be read-only at /{name}, got {mount}")
        if env.get(f"{prefix}_IMAGE_VOLUME") != "1":
            problems.append(f"env {prefix}_IMAGE_VOLUME=1 is missing on the workspace container")
        if env.get(f"LLMSAFESPACES_{prefix}_BINARY") != binary:
            problems.append(f"env LLMSAFESPACES_{prefix}_BINARY is not {binary}")
        for arch in ("AMD64", "ARM64"):
            pin = env.get(f"LLMSAFESPACES_{prefix}_SHA256_{arch}") or ""
            if not HEX64.match(pin):
                problems.append(f"env LLMSAFESPACES_{prefix}_SHA256_{arch} is not 64 lowercase hex")
    return problems


def dry_run_create(
    server: str, token: str, context: ssl.SSLContext, pod: dict[str, Any]
) -> dict[str, Any]:
    namespace = pod["metadata"]["namespace"]
    request = urllib.request.Request(  # noqa: S310 - the URL is the in-cluster API server
        f"{server}/api/v1/namespaces/{namespace}/pods?dryRun=All&fieldValidation=Strict",
        data=json.dumps(pod).encode(),
        method="POST",
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        },
    )
    with urllib.request.urlopen(request, context=context, timeout=30) as response:  # noqa: S310
        body: dict[str, Any] = json.load(response)
    return body


def main() -> int:
    namespace = os.environ["PROBE_NAMESPACE"]
    images = {"agentd": os.environ["AGENTD_IMAGE"], "opencode": os.environ["OPENCODE_IMAGE"]}
    server = os.environ.get("KUBERNETES_API_URL") or (
        f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}"
    )
    sa_dir = os.environ.get("SERVICE_ACCOUNT_DIR", SA_DIR)
    with open(os.path.join(sa_dir, "token"), encoding="utf-8") as handle:
        token = handle.read().strip()
    context = ssl.create_default_context(cafile=os.path.join(sa_dir, "ca.crt"))
    try:
        pod = dry_run_create(
            server, token, context, probe_pod(namespace, os.environ["PROBE_IMAGE"])
        )
    except urllib.error.HTTPError as err:
        # The API server's Status message (e.g. a webhook denial) says what went wrong.
        detail = err.read().decode(errors="replace")[:2000]
        print(f"FAIL: dry-run pod create in {namespace!r} returned HTTP {err.code}: {detail}")
        return 1
    except (urllib.error.URLError, OSError) as err:
        print(f"FAIL: cannot reach the API server at {server}: {err}")
        return 1
    problems = wiring_problems(pod, images)
    for problem in problems:
        print(f"FAIL: {problem}")
    if problems:
        return 1
    print(f"OK: a new workspace pod in {namespace!r} gets agentd and opencode delivery injected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
