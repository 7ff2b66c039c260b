"""`helm test`: the hook objects, and the probe script run for real against an HTTPS API.

The probe runs in the wspin image with the standard library only. Here it runs as a real
subprocess against a loopback HTTPS server standing in for the API server (the one boundary
where nothing real can run without a cluster); the server answers with a captured injected pod.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import ipaddress
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.chart.helm import CHART, NAMESPACE, Rendered, render
from tests.chart.notes import render_notes
from tests.fixtures import ADMISSION
from wspin.core.workspace_pod import entrypoint_problem

PROBE = CHART / "files" / "injection-probe.py"
CAPTURES = ADMISSION
TOKEN = "probe-token-3f9a1c"
AGENTD = "ghcr.io/example/agentd@sha256:" + "0123456789abcdef" * 4
OPENCODE = "ghcr.io/example/opencode@sha256:" + "fedcba9876543210" * 4


def hooks(rendered: Rendered) -> list[dict[str, Any]]:
    return [
        doc
        for doc in rendered
        if (doc["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"
    ]


def test_the_test_pod_stays_for_its_logs_and_its_grants_go_once_the_test_passes(
    default_render: Rendered,
) -> None:
    # `helm test --logs` reads the pod's logs after the hooks ran: a pod deleted on success
    # turns a passing test into `pods "wspin-test" not found` and exit status 1.
    objects = hooks(default_render)
    policies = {
        doc["kind"]: doc["metadata"]["annotations"]["helm.sh/hook-delete-policy"] for doc in objects
    }
    assert policies == {
        "Pod": "before-hook-creation",
        "ConfigMap": "before-hook-creation,hook-succeeded",
        "Role": "before-hook-creation,hook-succeeded",
        "RoleBinding": "before-hook-creation,hook-succeeded",
        "ServiceAccount": "before-hook-creation,hook-succeeded",
    }
    assert len(objects) == len(policies)


def test_the_test_pod_runs_the_chart_probe_script(default_render: Rendered) -> None:
    pod = default_render.one("Pod")
    (container,) = pod["spec"]["containers"]
    assert container["command"] == ["python", "/probe/injection-probe.py"]
    config_map = default_render.get("ConfigMap", pod["spec"]["volumes"][0]["configMap"]["name"])
    assert config_map["data"]["injection-probe.py"] == PROBE.read_text().rstrip("\n")
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {
        "PROBE_NAMESPACE": "default",
        "PROBE_IMAGE": "ghcr.io/llmsafespaces/wspin:0.1.0",
        "AGENTD_IMAGE": "ghcr.io/example/agentd:v1.4.0@sha256:" + "0123456789abcdef" * 4,
        "OPENCODE_IMAGE": OPENCODE,
    }
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["metadata"]["namespace"] == NAMESPACE


def test_the_test_account_may_only_create_pods_in_the_probe_namespace(
    full_render: Rendered,
) -> None:
    role = full_render.get("Role", "wspin-test")
    assert role["metadata"]["namespace"] == "ws-demo"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]
    binding = full_render.get("RoleBinding", "wspin-test")
    assert binding["metadata"]["namespace"] == "ws-demo"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "wspin-test", "namespace": NAMESPACE}
    ]


def test_without_a_namespace_the_chart_renders_with_its_defaults_and_no_test_hook() -> None:
    # What a first `helm install` or a GitOps render without -n does: the release lands in
    # "default", which the webhook then excludes, so no probe namespace can be chosen.
    from tests.chart.helm import CHART, VALUES, parse_documents, run_helm

    result = run_helm(["template", "wspin", str(CHART), "--values", str(VALUES / "minimal.yaml")])
    assert result.returncode == 0, result.stderr
    documents = parse_documents(result.stdout)
    assert documents
    assert hooks(Rendered(tuple(documents))) == []
    namespaced = [doc for doc in documents if "namespace" in doc["metadata"]]
    assert {doc["metadata"]["namespace"] for doc in namespaced} == {"default"}


def test_a_release_in_default_probes_the_namespace_it_is_told(tmp_path: Path) -> None:
    rendered = render(sets={"tests.probeNamespace": "ws-demo"}, namespace="default")
    assert {d["metadata"]["namespace"] for d in hooks(rendered) if d["kind"] == "Role"} == {
        "ws-demo"
    }
    notes = render_notes(
        tmp_path, "1.35.0", namespace="default", **{"tests.probeNamespace": "ws-demo"}
    )
    assert "a dry-run pod in ws-demo" in notes


def test_the_notes_say_how_to_name_a_probe_namespace_when_none_can_be_chosen(
    tmp_path: Path,
) -> None:
    notes = render_notes(tmp_path, "1.35.0", namespace="default")
    assert "helm test` needs a namespace where the webhook injects" in notes
    assert "--set tests.probeNamespace=<workspace namespace>" in notes
    assert "helm test wspin -n default --logs" in notes
    elsewhere = render_notes(tmp_path / "elsewhere", "1.35.0")
    assert "a dry-run pod in default" in elsewhere
    assert "needs a namespace" not in elsewhere


def test_default_is_not_probed_when_the_webhook_is_told_to_skip_it() -> None:
    from tests.chart.helm import render

    rendered = render(sets={"webhook.excludedNamespaces": ["default"]})
    assert hooks(rendered) == []


def test_a_probe_namespace_the_webhook_skips_fails_the_render() -> None:
    from tests.chart.helm import template

    result = template(sets={"tests.probeNamespace": NAMESPACE})
    assert result.returncode != 0
    assert "tests.probeNamespace" in result.stderr


# -- the probe script itself ----------------------------------------------------------------


def load_probe() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("injection_probe", PROBE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def captured_pod(name: str) -> dict[str, Any]:
    review = json.loads((CAPTURES / name).read_text())
    return review["request"]["object"]  # type: ignore[no-any-return]


IMAGES = {"agentd": AGENTD, "opencode": OPENCODE}


def test_the_probe_accepts_a_pod_the_api_server_returned_injected() -> None:
    probe = load_probe()
    assert (
        probe.wiring_problems(captured_pod("pod-create-workspace-already-injected.json"), IMAGES)
        == []
    )


def test_the_probe_reports_every_missing_piece_of_an_uninjected_pod() -> None:
    problems = load_probe().wiring_problems(captured_pod("pod-create-workspace.json"), IMAGES)
    joined = "\n".join(problems)
    for piece in (
        "volume 'agentd'",
        "volume 'opencode'",
        "AGENTD_IMAGE_VOLUME",
        "OPENCODE_SHA256_ARM64",
    ):
        assert piece in joined


def test_the_probe_names_the_feature_gate_when_image_volumes_were_dropped() -> None:
    # What a v1.32 API server with ImageVolume off returns: env pins kept, volumes and mounts gone.
    pod = captured_pod("pod-create-workspace-already-injected.json")
    pod["spec"]["volumes"] = [v for v in pod["spec"]["volumes"] if "image" not in v]
    for container in pod["spec"]["containers"]:
        container["volumeMounts"] = [
            m for m in container.get("volumeMounts", []) if m["name"] not in IMAGES
        ]
    problems = load_probe().wiring_problems(pod, IMAGES)
    assert any("ImageVolume feature gate" in p for p in problems)


def test_the_probe_rejects_a_different_image_and_a_writable_mount() -> None:
    pod = captured_pod("pod-create-workspace-already-injected.json")
    other = copy.deepcopy(IMAGES)
    other["opencode"] = "ghcr.io/example/opencode@sha256:" + "9" * 64
    for container in pod["spec"]["containers"]:
        for mount in container.get("volumeMounts", []):
            if mount["name"] == "agentd":
                mount["readOnly"] = False
    problems = load_probe().wiring_problems(pod, other)
    assert any("expected 'ghcr.io/example/opencode@sha256:9999" in p for p in problems)
    assert any("'agentd' mount must be read-only" in p for p in problems)


def test_the_probe_pod_is_a_workspace_pod_to_the_webhook() -> None:
    pod = load_probe().probe_pod("ws-demo", "img")
    labels = pod["metadata"]["labels"]
    assert labels["app"] == "llmsafespaces" and labels["component"] == "workspace"
    assert "llmsafespaces.dev/workspace" in labels
    assert [c["name"] for c in pod["spec"]["containers"]] == ["workspace"]
    assert entrypoint_problem(pod) is None  # the injector would refuse any other entry point


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("sa")
    (folder / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "token").write_text(TOKEN + "\n")
    key_file = folder / "tls.key"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return folder, key_file


async def run_probe(
    tls_files: tuple[Path, Path], respond: Any
) -> tuple[int, str, list[web.Request], list[dict[str, Any]]]:
    import ssl

    folder, key_file = tls_files
    seen: list[web.Request] = []
    bodies: list[dict[str, Any]] = []

    async def create_pod(request: web.Request) -> web.Response:
        seen.append(request)
        body = await request.json()
        bodies.append(body)
        return respond(body)  # type: ignore[no-any-return]

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{namespace}/pods", create_pod)
    runner = web.AppRunner(app)
    await runner.setup()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(folder / "ca.crt", key_file)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(PROBE),
            env={
                "PROBE_NAMESPACE": "ws-demo",
                "PROBE_IMAGE": "ghcr.io/llmsafespaces/wspin:0.1.0",
                "AGENTD_IMAGE": AGENTD,
                "OPENCODE_IMAGE": OPENCODE,
                "KUBERNETES_API_URL": f"https://127.0.0.1:{port}",
                "SERVICE_ACCOUNT_DIR": str(folder),
            },
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(process.communicate(), timeout=30)
    finally:
        await runner.cleanup()
    assert process.returncode is not None
    return process.returncode, output.decode(), seen, bodies


def injected(body: dict[str, Any]) -> web.Response:
    pod = captured_pod("pod-create-workspace-already-injected.json")
    pod["metadata"] = {**body["metadata"], "name": "wspin-injection-probe-x7k2p"}
    return web.json_response(pod, status=201)


async def test_the_probe_passes_against_an_api_server_that_injects(
    tls_files: tuple[Path, Path],
) -> None:
    code, output, seen, bodies = await run_probe(tls_files, injected)
    assert code == 0, output
    assert "OK: a new workspace pod in 'ws-demo'" in output
    (request,) = seen
    assert request.query["dryRun"] == "All"
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.match_info["namespace"] == "ws-demo"
    assert bodies[0]["metadata"]["labels"]["component"] == "workspace"
    assert TOKEN not in output


async def test_the_probe_fails_with_the_api_servers_reason_and_never_prints_the_token(
    tls_files: tuple[Path, Path],
) -> None:
    def denied(_: dict[str, Any]) -> web.Response:
        status = {
            "kind": "Status",
            "status": "Failure",
            "code": 403,
            "message": 'admission webhook "pods.wspin.llmsafespaces.dev" denied the request',
        }
        return web.json_response(status, status=403)

    code, output, _, _ = await run_probe(tls_files, denied)
    assert code == 1
    assert "HTTP 403" in output and "pods.wspin.llmsafespaces.dev" in output
    assert TOKEN not in output


async def test_the_probe_fails_when_the_returned_pod_lacks_the_wiring(
    tls_files: tuple[Path, Path],
) -> None:
    def untouched(body: dict[str, Any]) -> web.Response:
        return web.json_response(body, status=201)

    code, output, _, _ = await run_probe(tls_files, untouched)
    assert code == 1
    assert "FAIL: volume 'agentd' is missing" in output
