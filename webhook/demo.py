"""``wspin demo``: the whole admission path on loopback, with no cluster and no flags.

It makes a throwaway CA and serving certificate, serves the real webhook application over
TLS on 127.0.0.1, sends ``examples/workspace-pod.yaml`` as the AdmissionReview a
kube-apiserver would (same headers, the ``?timeout=10s`` query, verified TLS to the
Service's DNS name), applies the returned patch, and prints what the pod now carries.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from webhook.inject import InjectConfig
from wspin.core.clock import utc_now
from wspin.core.contract import AGENTD, ARCHES, MAIN_CONTAINER, OPENCODE
from wspin.core.delivery import PinSet, ResolvedArtifact

# The server, TLS and HTTP client modules are imported when the demo runs, not by
# `wspin demo --help`.

# An example release: made-up digests and pins, recognisable in the demo's output.
DEMO_CONFIG = InjectConfig(
    agentd=ResolvedArtifact(
        AGENTD,
        "ghcr.io/example/agentd@sha256:" + "0123456789abcdef" * 4,
        PinSet("a" * 64, "b" * 64),
        source="demo",
    ),
    opencode=ResolvedArtifact(
        OPENCODE,
        "ghcr.io/example/opencode@sha256:" + "fedcba9876543210" * 4,
        PinSet("c" * 64, "d" * 64),
        source="demo",
    ),
)
SERVICE, NAMESPACE = "wspin-webhook", "wspin-system"


def run_demo(filename: str) -> int:
    """Send the Pod manifest in ``filename`` through a webhook on loopback; the exit status."""
    try:
        pod = yaml.safe_load(Path(filename).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        print(f"error: cannot read pod manifest {filename}: {err}", file=sys.stderr)
        return 1
    if not isinstance(pod, dict) or pod.get("kind") != "Pod":
        print(f"error: {filename} is not a Pod manifest", file=sys.stderr)
        return 1
    return asyncio.run(_demo(pod))


async def _demo(pod: dict[str, Any]) -> int:
    from prometheus_client import CollectorRegistry

    from certs.files import FileSource
    from certs.metrics import CertificateMetrics
    from webhook.app import MUTATE_PODS_PATH, make_app
    from webhook.validate import ValidatorConfig
    from wspin.http.probes import Readiness
    from wspin.http.server import serve

    with tempfile.TemporaryDirectory(prefix="wspin-demo-") as folder:
        ca_file = _write_throwaway_certificates(Path(folder))
        source = FileSource(
            Path(folder) / "tls.crt",
            Path(folder) / "tls.key",
            metrics=CertificateMetrics(CollectorRegistry()),  # the demo serves no metrics
        )
        source.load_at_start()
        app = make_app(DEMO_CONFIG, ValidatorConfig(), Readiness())
        runner = await serve(app, "127.0.0.1", 0, ssl_context=source.ssl_context())
        port = runner.port
        try:
            print(
                f"webhook serving https://127.0.0.1:{port}{MUTATE_PODS_PATH} "
                f"(certificate for {SERVICE}.{NAMESPACE}.svc, throwaway CA)\n"
            )
            answer = await _send(port, ca_file, pod)
            status = _report(pod, answer)
            if status == 0 and answer.get("patch"):
                injected = jsonpatch.apply_patch(pod, json.loads(base64.b64decode(answer["patch"])))
                again = await _send(port, ca_file, injected)
                verdict = "no patch" if "patch" not in again else "PATCHED AGAIN"
                message = again.get("status", {}).get("message", "")
                print(f"\nre-sent the injected pod: {verdict} — {message}")
                status = 0 if "patch" not in again else 1
        finally:
            await runner.shutdown()
    return status


def _write_throwaway_certificates(folder: Path) -> Path:
    from certs.build import issue_serving, new_ca, service_dns_names
    from certs.files import write_certificates

    now = utc_now()
    ca = new_ca(now)
    write_certificates(folder, ca, issue_serving(ca, service_dns_names(SERVICE, NAMESPACE), now))
    return folder / "ca.crt"


async def _send(port: int, ca_file: Path, pod: dict[str, Any]) -> dict[str, Any]:
    """POST the pod as the API server would: verified TLS to the Service's DNS name."""
    import aiohttp

    from webhook.app import MUTATE_PODS_PATH

    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": pod["metadata"].get("name"),
            "namespace": pod["metadata"].get("namespace", "default"),
            "operation": "CREATE",
            "userInfo": {"username": "wspin-demo"},
            "object": pod,
            "oldObject": None,
            "dryRun": False,
        },
    }
    trust = ssl.create_default_context(cafile=str(ca_file))
    url = f"https://127.0.0.1:{port}{MUTATE_PODS_PATH}?timeout=10s"
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            url,
            json=review,
            ssl=trust,
            server_hostname=f"{SERVICE}.{NAMESPACE}.svc",
            headers={"User-Agent": "kube-apiserver-admission"},
        ) as response,
    ):
        response.raise_for_status()
        answer: dict[str, Any] = (await response.json())["response"]
        return answer


def _report(pod: dict[str, Any], answer: dict[str, Any]) -> int:
    verdict = "ALLOWED" if answer["allowed"] else "DENIED"
    print(f"decision: {verdict} — {answer.get('status', {}).get('message', '')}")
    for warning in answer.get("warnings", []):
        print(f"warning:  {warning}")
    if not answer["allowed"]:
        return 1
    ops = json.loads(base64.b64decode(answer["patch"])) if answer.get("patch") else []
    print(f"\npatch ({answer.get('patchType', 'none')}, {len(ops)} ops):")
    for op in ops:
        print(f"  {op['op']:7} {op['path']}  {json.dumps(op.get('value'), sort_keys=True)}")
    result = jsonpatch.apply_patch(pod, ops)
    _print_wiring(result)
    return 0


def _print_wiring(pod: dict[str, Any]) -> None:
    spec = pod["spec"]
    print("\nimage volumes:")
    for volume in spec.get("volumes", []):
        if "image" in volume:
            image = volume["image"]
            print(f"  {volume['name']:9} {image['reference']}  (pullPolicy {image['pullPolicy']})")
    print("\ndelivery mounts:")
    for kind in ("initContainers", "containers"):
        for container in spec.get(kind, []):
            mounts = [
                f"{m['mountPath']} ({'ro' if m.get('readOnly') else 'RW'})"
                for m in container.get("volumeMounts", [])
                if m["name"] in (AGENTD.volume, OPENCODE.volume)
            ]
            if mounts:
                print(f"  {container['name']:20} {', '.join(mounts)}")
    print(f"\nverify pins on container {MAIN_CONTAINER!r}:")
    main = next(c for c in spec["containers"] if c["name"] == MAIN_CONTAINER)
    env = {e["name"]: e.get("value", "") for e in main.get("env", [])}
    for artifact in (AGENTD, OPENCODE):
        names = [
            artifact.marker_env,
            artifact.binary_env,
            *(artifact.sha256_env(arch) for arch in ARCHES),
        ]
        for name in names:
            print(f"  {name:38} {env.get(name, '<missing>')}")
    receipt = pod["metadata"].get("annotations", {}).get("llmsafespaces.dev/delivery")
    print(f"\nreceipt annotation llmsafespaces.dev/delivery: {receipt}")
