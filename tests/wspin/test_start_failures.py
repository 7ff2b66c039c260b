"""``wspin controller`` and ``wspin webhook`` as processes that cannot start: each ends with
exit 1 and one line naming the cause and what fixes it, never a traceback.

Flags are judged before the first API call (an unreachable API server does not hide a bad
flag). Then the API server: unreachable, refusing our credentials (401), the process's
namespace missing, a watched resource not listable (403) or not served (its CRD missing). Runs
against the test API server and unchanged against a real one: the refusals a real server gives
by itself (a token it does not know, a ServiceAccount without RBAC) are injected into the test
server; the missing CRD needs a server without them, so it is always the test server's.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kubeapi import KubeServer
from tests.webhook.process import PINS
from wspin.core.kinds import SERVICE_ACCOUNTS
from wspin.core.runtimes import RUNTIME_ENVIRONMENTS
from wspin.kube.client import Kube

PROCESSES = ["controller", "webhook"]
UNREACHABLE = "http://127.0.0.1:1"


def write_kubeconfig(path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def with_token(kubeconfig: Path, token: str, path: Path) -> Path:
    """``kubeconfig``'s cluster (server and CA) with a bearer token as the user."""
    config = yaml.safe_load(kubeconfig.read_text())
    current = config["current-context"]
    context = next(c["context"] for c in config["contexts"] if c["name"] == current)
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    return write_kubeconfig(path, cluster, {"token": token})


async def run(process: str, kubeconfig: Path, *argv: str, namespace: str = "") -> list[str]:
    """The process's stderr lines once it exited 1 (within a minute)."""
    args = [f"--kubeconfig={kubeconfig}"]
    if process == "webhook":
        # Certificates from files: the webhook needs nothing from the API server but the check.
        args += [*PINS, "--port=0", "--metrics-port=0", "--tls-cert-file=/nonexistent"]
        args += ["--tls-key-file=/nonexistent"]
    args += argv  # last: the test's flags win
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("WSPIN_") and k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }
    env["POD_NAMESPACE"] = namespace or f"wspin-test-absent-{uuid.uuid4().hex[:8]}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "wspinctl.cli",
        process,
        *args,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, stderr = await asyncio.wait_for(proc.communicate(), 60)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    lines = stderr.decode(errors="replace").splitlines()
    assert proc.returncode == 1, "\n".join(lines)
    return lines


def the_one_line(lines: list[str]) -> str:
    """The failure line: the controller's one error-level JSON line (``error; fix``), the
    webhook's one ``error:`` line; and nothing like a traceback."""
    text = "\n".join(lines)
    assert "Traceback" not in text, text
    errors = []
    for line in lines:
        if line.startswith("error: "):
            errors.append(line)
            continue
        record = json.loads(line)  # every other line is a JSON log line
        if record["level"] == "error":
            fix = record.get("fix")
            errors.append(f"{record['error']}; {fix}" if fix else record["error"])
    assert len(errors) == 1 or (
        # The controller's flag refusal is the log line and its plain copy for a terminal.
        len(errors) == 2 and errors[1] == "error: " + errors[0]
    ), text
    return errors[-1]


@pytest.mark.parametrize("process", PROCESSES)
async def test_an_unreachable_api_server_is_one_line_naming_the_kubeconfig(
    process: str, tmp_path: Path
) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kc", {"server": UNREACHABLE}, {"token": "t"})
    line = the_one_line(await run(process, kubeconfig))
    assert f"cannot reach the Kubernetes API server at {UNREACHABLE}" in line
    assert "--kubeconfig" in line


async def test_the_relay_flags_are_judged_before_the_api_server_is_called(
    tmp_path: Path,
) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kc", {"server": UNREACHABLE}, {"token": "t"})
    line = the_one_line(await run("controller", kubeconfig, "--enable-inference-relay"))
    assert "--relay-artifact-url is empty" in line
    assert "controller.inferenceRelay.artifact.urls" in line


async def test_the_webhooks_flags_are_judged_before_the_api_server_is_called(
    tmp_path: Path,
) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kc", {"server": UNREACHABLE}, {"token": "t"})
    line = the_one_line(await run("webhook", kubeconfig, "--port=70000"))
    assert "--port must be a TCP port" in line


@pytest.mark.parametrize("process", PROCESSES)
async def test_a_missing_namespace_is_one_line_naming_pod_namespace(
    process: str, kubeconfig: Path
) -> None:
    missing = f"wspin-test-absent-{uuid.uuid4().hex[:8]}"
    line = the_one_line(await run(process, kubeconfig, namespace=missing))
    assert f"namespace {missing!r} does not exist" in line
    assert "POD_NAMESPACE" in line and "helm install -n" in line


@pytest.mark.parametrize("process", PROCESSES)
async def test_refused_credentials_are_one_line_naming_the_kubeconfig(
    process: str,
    kubeconfig: Path,
    namespace: str,
    _test_server: KubeServer | None,
    tmp_path: Path,
) -> None:
    if _test_server is not None:
        _test_server.fail_next(401, method="GET", path="/version", message="Unauthorized")
    else:  # a token the real server never issued
        kubeconfig = with_token(kubeconfig, "not-a-token", tmp_path / "kc")
    line = the_one_line(await run(process, kubeconfig, namespace=namespace))
    assert f"refused the {process}'s credentials" in line
    assert "--kubeconfig" in line


@pytest.mark.parametrize("process", PROCESSES)
async def test_missing_rbac_is_one_line_naming_the_chart_role(
    process: str,
    kubeconfig: Path,
    kube: Kube,
    namespace: str,
    _test_server: KubeServer | None,
    tmp_path: Path,
) -> None:
    if _test_server is not None:
        _test_server.fail_next(
            403,
            method="GET",
            path=RUNTIME_ENVIRONMENTS.path(None),
            exact=True,
            message='runtimeenvironments.llmsafespaces.dev is forbidden: User "system:'
            f'serviceaccount:{namespace}:bare" cannot list resource "runtimeenvironments"',
        )
    else:  # a ServiceAccount nobody granted anything
        await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": "bare"}}, namespace)
        issued = await kube.request(
            "POST",
            SERVICE_ACCOUNTS.path(namespace, "bare", "token"),
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
        kubeconfig = with_token(kubeconfig, issued["status"]["token"], tmp_path / "kc")
    line = the_one_line(await run(process, kubeconfig, namespace=namespace))
    assert f"the {process} may not list" in line and "cluster-wide" in line
    assert "forbidden" in line
    assert f"install the chart's {process} ClusterRole" in line


@pytest.mark.parametrize("process", PROCESSES)
async def test_a_missing_crd_is_one_line_naming_the_charts_crds(
    process: str, tmp_path: Path
) -> None:
    async with KubeServer(crd_files=[]) as bare:
        kubeconfig = write_kubeconfig(tmp_path / "kc", {"server": bare.url}, {"token": "t"})
        line = the_one_line(await run(process, kubeconfig))
    assert "does not serve" in line and "its CRD is not installed" in line
    assert "charts/wspin/crds" in line
