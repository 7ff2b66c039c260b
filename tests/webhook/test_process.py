"""``wspin webhook`` as a real process: start-up failures exit 1 naming the flag; a good
configuration serves HTTPS admission and the metrics port, and SIGTERM exits 0."""

from __future__ import annotations

import asyncio
import datetime
import json
import signal
import ssl
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from certs.build import issue_serving, new_ca, service_dns_names
from certs.files import write_certificates
from tests.webhook.conftest import SERVICE_HOST, load_capture
from tests.webhook.process import PINS, clean_env, free_port, run_wspin


@pytest.mark.parametrize(
    ("change", "expected", "helm_value"),
    [
        (
            {0: "--agentd-image=ghcr.io/example/agentd:v1"},
            "agentd delivery: --agentd-image must be pinned by digest",
            "agentdDelivery.image",
        ),
        (
            {
                3: "--opencode-image=",
                4: "--opencode-binary-sha256-amd64=",
                5: "--opencode-binary-sha256-arm64=",
            },
            "opencode delivery: --opencode-image is mandatory",
            "opencodeDelivery.image",
        ),
        (
            {3: "--opencode-image="},
            "opencode delivery: --opencode-image is required when binary sha256 flags are set",
            "opencodeDelivery.image",
        ),
        (
            {1: "--agentd-binary-sha256-amd64=" + "A" * 64},
            "--agentd-binary-sha256-amd64 must be 64 hex lowercase",
            "agentdDelivery.binarySHA256Amd64",
        ),
        (
            {5: "--opencode-binary-sha256-arm64="},
            "set BOTH binary sha256 flags or neither",
            "opencodeDelivery.binarySHA256Arm64",
        ),
    ],
)
async def test_invalid_delivery_configuration_exits_1_naming_the_flag(
    change: dict[int, str], expected: str, helm_value: str, tmp_path: Path
) -> None:
    args = [change.get(i, flag) for i, flag in enumerate(PINS)]
    status, stderr = await run_wspin(
        "webhook",
        *args,
        "--tls-cert-file",
        str(tmp_path / "x"),
        "--tls-key-file",
        str(tmp_path / "y"),
    )
    assert status == 1
    assert expected in stderr
    assert helm_value in stderr


async def test_missing_certificate_files_exit_1_naming_the_flags(tmp_path: Path) -> None:
    status, stderr = await run_wspin(
        "webhook",
        *PINS,
        "--tls-cert-file",
        str(tmp_path / "no"),
        "--tls-key-file",
        str(tmp_path / "no.key"),
    )
    assert status == 1
    assert "--tls-cert-file" in stderr


@pytest.fixture
async def served(
    tmp_path: Path,
) -> AsyncIterator[tuple[int, int, ssl.SSLContext, asyncio.subprocess.Process]]:
    now = datetime.datetime.now(datetime.UTC)
    ca = new_ca(now)
    write_certificates(
        tmp_path, ca, issue_serving(ca, service_dns_names("wspin-webhook", "wspin-system"), now)
    )
    port, metrics_port = free_port(), free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "wspinctl.cli",
        "webhook",
        *PINS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--metrics-port",
        str(metrics_port),
        "--tls-cert-file",
        str(tmp_path / "tls.crt"),
        "--tls-key-file",
        str(tmp_path / "tls.key"),
        # Every warning shown, even those Python hides by default: each must be a log line.
        env={**clean_env(), "PYTHONWARNINGS": "default"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    trust = ssl.create_default_context(cadata=ca.cert_pem.decode())
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(200):
                try:
                    async with session.get(f"http://127.0.0.1:{metrics_port}/readyz") as reply:
                        if reply.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    pass
                assert process.returncode is None, "webhook exited during start-up"
                await asyncio.sleep(0.05)
        yield port, metrics_port, trust, process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_webhook_process_serves_admission_and_metrics_then_stops_on_sigterm(
    served: tuple[int, int, ssl.SSLContext, asyncio.subprocess.Process],
) -> None:
    port, metrics_port, trust, process = served
    review = load_capture("pod-create-workspace.json")
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"https://127.0.0.1:{port}/mutate-pods?timeout=10s",
            json=review,
            ssl=trust,
            server_hostname=SERVICE_HOST,
        ) as reply:
            answer = (await reply.json())["response"]
        async with session.get(f"http://127.0.0.1:{metrics_port}/metrics") as reply:
            exposition = await reply.text()
    assert answer["allowed"] is True
    assert answer["patchType"] == "JSONPatch"
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(exposition)
        for s in family.samples
    }
    assert (
        samples[
            ("wspin_webhook_requests_total", (("outcome", "patched"), ("webhook", "mutate-pods")))
        ]
        == 1
    )
    assert samples[("wspin_webhook_injections_total", (("artifact", "agentd"),))] == 1
    assert samples[("wspin_webhook_injections_total", (("artifact", "opencode"),))] == 1
    assert (
        samples[
            (
                "wspin_webhook_request_duration_seconds_count",
                (("outcome", "patched"), ("webhook", "mutate-pods")),
            )
        ]
        == 1
    )
    expiry = samples[
        ("wspin_webhook_certificate_expiry_timestamp_seconds", (("certificate", "serving"),))
    ]
    assert expiry > datetime.datetime.now(datetime.UTC).timestamp() + 300 * 86400

    process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(process.wait(), 15) == 0
    assert process.stderr is not None and process.stdout is not None
    # Start, a review, shutdown: every line either stream carries is one JSON object.
    assert (await process.stdout.read()).decode() == ""
    lines = [json.loads(line) for line in (await process.stderr.read()).decode().splitlines()]
    assert lines and all(isinstance(line, dict) for line in lines)
    decisions = [line for line in lines if line.get("decision")]
    assert len(decisions) == 1
    assert decisions[0]["uid"] == review["request"]["uid"]
    assert decisions[0]["decision"] == "patched"
    assert any(line["msg"] == "webhook shutting down" for line in lines)


@pytest.mark.parametrize("shutdown_delay", [1.5])
async def test_after_sigterm_the_webhook_stays_reachable_but_unready_for_the_delay(
    served: tuple[int, int, ssl.SSLContext, asyncio.subprocess.Process], shutdown_delay: float
) -> None:
    port, metrics_port, trust, process = served
    process.send_signal(signal.SIGTERM)
    async with aiohttp.ClientSession() as session:
        async with asyncio.timeout(1.0):
            while True:
                async with session.get(f"http://127.0.0.1:{metrics_port}/readyz") as reply:
                    if reply.status == 503:
                        assert "shutting down" in await reply.text()
                        break
                await asyncio.sleep(0.02)
        review = load_capture("pod-create-workspace.json")
        async with session.post(
            f"https://127.0.0.1:{port}/mutate-pods",
            json=review,
            ssl=trust,
            server_hostname=SERVICE_HOST,
        ) as reply:
            assert (await reply.json())["response"]["allowed"] is True
    assert process.returncode is None
    assert await asyncio.wait_for(process.wait(), 15) == 0
