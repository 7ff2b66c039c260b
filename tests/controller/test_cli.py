"""``wspin controller`` as a real process: exit codes, arming from argv, leadership, SIGTERM."""

from __future__ import annotations

import asyncio
import itertools
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.controller.conftest import INTERNAL_TOKEN, CredentialSource, FakeRouter, publish_pub
from tests.controller.process import SHORT_LEASE, Controller, clean_env
from tests.kubeapi import KubeServer
from tests.kubeapi.admission import Denial
from tests.support.waiting import eventually
from wspin.core.clock import utc_now
from wspin.core.kinds import LEASES, NAMESPACES, WORKSPACES
from wspin.kube.client import Kube


@pytest.fixture
async def spawn() -> AsyncIterator[Callable[..., Any]]:
    started: list[Controller] = []

    async def start(*argv: str, env: dict[str, str]) -> Controller:
        controller = await Controller.start(*argv, env=env)
        started.append(controller)
        return controller

    try:
        yield start
    finally:
        for controller in started:
            await controller.close()


def unreachable_kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return path


async def test_an_out_of_range_ttl_on_the_command_line_exits_85_before_any_api_call(
    spawn: Callable[..., Any], tmp_path: Path
) -> None:
    controller = await spawn(
        f"--kubeconfig={unreachable_kubeconfig(tmp_path)}",
        "--relay-only-key-delivery=true",
        "--relay-token-ttl=192h",
        "--api-service-url=http://api.invalid",
        env=clean_env(),
    )
    assert await controller.exit_code() == 85
    (refusal,) = controller.find("relay-only key delivery: refusing to start (not armed)")
    assert refusal["level"] == "error"
    assert "--relay-token-ttl must be within 1s..7d, got 192h0m0s" in refusal["reason"]
    assert not controller.find("relay-only key delivery enabled")


async def test_the_ttl_from_the_environment_reaches_arming_too(
    spawn: Callable[..., Any], tmp_path: Path
) -> None:
    controller = await spawn(
        f"--kubeconfig={unreachable_kubeconfig(tmp_path)}",
        env=clean_env(
            WSPIN_RELAY_ONLY_KEY_DELIVERY="true",
            WSPIN_RELAY_TOKEN_TTL="0s",
            WSPIN_API_SERVICE_URL="http://api.invalid",
        ),
    )
    assert await controller.exit_code() == 85
    (refusal,) = controller.find("relay-only key delivery: refusing to start (not armed)")
    assert "got 0s" in refusal["reason"]


async def test_the_internal_token_is_scrubbed_even_from_text_a_server_sent_back(
    spawn: Callable[..., Any],
    kube: Kube,
    namespace: str,
    kubeconfig: Path,
    router: FakeRouter,
    credentials: CredentialSource,
) -> None:
    # The refusal quotes the redirect target, which the far side chooses; a gateway that
    # echoes the request's credentials into it must not put the token in the log.
    await publish_pub(kube, namespace)
    credentials.status = 307
    credentials.location = f"{credentials.url}/login?next=%2F&token={INTERNAL_TOKEN}"
    controller = await spawn(
        f"--kubeconfig={kubeconfig}",
        "--relay-only-key-delivery=true",
        f"--llm-relay-router-url={router.url}",
        f"--llm-relay-namespace={namespace}",
        f"--api-service-url={credentials.url}",
        env=clean_env(POD_NAMESPACE=namespace, LLMSAFESPACES_INTERNAL_TOKEN=INTERNAL_TOKEN),
    )
    assert await controller.exit_code() == 85
    (refusal,) = controller.find("relay-only key delivery: refusing to start (not armed)")
    assert "credential source redirected (HTTP 307" in refusal["reason"]
    assert INTERNAL_TOKEN not in controller.text()


async def test_invalid_settings_exit_1_naming_the_flag(
    spawn: Callable[..., Any], tmp_path: Path
) -> None:
    # Every flag's checks are covered in test_settings; this proves the exit status.
    controller = await spawn(
        f"--kubeconfig={unreachable_kubeconfig(tmp_path)}",
        "--relay-token-ttl=1d",
        env=clean_env(),
    )
    assert await controller.exit_code() == 1
    (line,) = controller.find("invalid configuration")
    assert "--relay-token-ttl" in line["error"]


async def test_the_sidecar_without_an_agentd_image_exits_1_naming_the_image_flag(
    spawn: Callable[..., Any], tmp_path: Path
) -> None:
    controller = await spawn(
        f"--kubeconfig={unreachable_kubeconfig(tmp_path)}", "--agentd-sidecar", env=clean_env()
    )
    assert await controller.exit_code() == 1
    (line,) = controller.find("invalid configuration")
    assert "--agentd-image" in line["error"]


async def test_unusable_kubeconfig_exits_1_saying_where_it_looked(
    spawn: Callable[..., Any], tmp_path: Path
) -> None:
    missing = tmp_path / "nope"
    controller = await spawn(f"--kubeconfig={missing}", env=clean_env())
    assert await controller.exit_code() == 1
    (line,) = controller.find("cannot reach the Kubernetes API")
    assert str(missing) in line["error"]


async def test_an_armed_leader_serves_ready_and_releases_its_lease_on_sigterm(
    spawn: Callable[..., Any],
    kube: Kube,
    namespace: str,
    kubeconfig: Path,
    router: FakeRouter,
    credentials: CredentialSource,
) -> None:
    await publish_pub(kube, namespace)
    controller = await spawn(
        f"--kubeconfig={kubeconfig}",
        "--health-port=0",
        "--metrics-port=0",
        "--enable-leader-election",
        "--relay-only-key-delivery=true",
        f"--llm-relay-router-url={router.url}",
        f"--llm-relay-namespace={namespace}",
        "--relay-token-ttl=12h",
        f"--api-service-url={credentials.url}",
        # Production lease timings: a loaded machine must not make this leader flap, or the
        # lease it releases on SIGTERM would not be its own.
        env=clean_env(
            POD_NAMESPACE=namespace, POD_NAME="ctrl-a", LLMSAFESPACES_INTERNAL_TOKEN=INTERNAL_TOKEN
        ),
    )
    armed = await controller.wait_for("relay-only key delivery enabled")
    assert (armed["routerURL"], armed["namespace"], armed["tokenTTL"]) == (
        router.url,
        namespace,
        "12h0m0s",
    )
    serving = await controller.wait_for("serving probes and metrics")
    await controller.wait_for("acquired the leader lease")
    lease = await kube.get(LEASES, "wspin-controller", namespace)
    assert lease["spec"]["holderIdentity"].startswith("ctrl-a_")
    await controller.wait_ready(serving["health_port"])
    async with aiohttp.ClientSession() as http:
        metrics_url = f"http://127.0.0.1:{serving['metrics_port']}/metrics"
        async with http.get(metrics_url) as response:
            assert 'wspin_controller_leader{identity="ctrl-a_' in await response.text()

    controller.process.send_signal(signal.SIGTERM)
    assert await controller.exit_code() == 0
    lease = await kube.get(LEASES, "wspin-controller", namespace)
    assert not lease["spec"].get("holderIdentity"), "SIGTERM must release the lease"
    assert INTERNAL_TOKEN not in controller.text()
    # Start, arming, leading, shutdown: every line the process printed is one JSON object.
    assert controller.not_json == []
    assert controller.find("released the leader lease")


async def test_two_controllers_elect_one_leader_and_the_other_takes_over_after_a_kill(
    spawn: Callable[..., Any], kube: Kube, namespace: str, kubeconfig: Path
) -> None:
    def start(name: str) -> Any:
        return spawn(
            f"--kubeconfig={kubeconfig}",
            "--health-port=0",
            "--metrics-port=0",
            "--enable-leader-election",
            env=clean_env(POD_NAMESPACE=namespace, POD_NAME=name, **SHORT_LEASE),
        )

    first, second = await start("first"), await start("second")
    await first.wait_for("waiting to acquire the leader lease")
    await second.wait_for("waiting to acquire the leader lease")
    async with asyncio.timeout(15):
        while not (first.leading or second.leading):
            await asyncio.sleep(0.05)
    # Longer than a lease of renewals with both candidates running: never two leaders at
    # once (a loaded machine may hand the lease over, but only after the old leader stepped
    # down). The leadership intervals both logged are compared at the end.
    renewals: set[str] = set()

    async def renewed_three_times() -> bool:
        lease = await kube.get(LEASES, "wspin-controller", namespace)
        renewals.add(str(lease["spec"].get("renewTime")))
        return len(renewals) >= 3

    await eventually(renewed_three_times, "three renewals of the lease", timeout=15)
    await eventually(lambda: first.leading or second.leading, "a leader")
    leader, follower = (first, second) if first.leading else (second, first)
    killed_at = utc_now()
    leader.process.kill()  # no release: the follower must wait for the lease to expire
    await leader.exit_code()
    follower_name = "second" if follower is second else "first"
    async with asyncio.timeout(2 + 1.5 + 5):  # lease duration + renew deadline + slack
        while not follower.leading:
            await asyncio.sleep(0.05)
    lease = await kube.get(LEASES, "wspin-controller", namespace)
    assert lease["spec"]["holderIdentity"].startswith(f"{follower_name}_")
    terms = sorted(leader.terms(until=killed_at) + follower.terms(until=utc_now()))
    for (_, ended), (began, _) in itertools.pairwise(terms):
        assert ended <= began, f"two leaders at once: {terms}"
    follower.process.send_signal(signal.SIGTERM)
    assert await follower.exit_code() == 0


async def test_a_pod_refused_by_admission_is_one_log_line_and_every_line_is_json(
    spawn: Callable[..., Any],
    kube: Kube,
    namespace: str,
    kubeconfig: Path,
    kube_server: KubeServer,
) -> None:
    own = f"{namespace}-ctl"
    await kube.create(NAMESPACES, {"metadata": {"name": own}})
    pods = f"/api/v1/namespaces/{namespace}/pods"
    kube_server.deny_creates(
        Denial("webhook", "pods.wspin.llmsafespaces.dev", "injector down", pods, count=1000)
    )
    await kube.create(
        WORKSPACES,
        {
            "metadata": {"name": "ws1", "namespace": namespace},
            # An image reference: a bare name would wait for a RuntimeEnvironment first.
            "spec": {"runtime": "docker.io/library/python:3.12", "storage": {"size": "1Gi"}},
        },
    )
    controller = await spawn(
        f"--kubeconfig={kubeconfig}",
        "--agentd-image=ghcr.io/example/agentd@sha256:" + "a" * 64,
        "--opencode-image=ghcr.io/example/opencode@sha256:" + "b" * 64,
        "--health-port=0",
        "--metrics-port=0",
        env=clean_env(POD_NAMESPACE=own, POD_NAME="ctrl-a"),
    )

    def attempts() -> int:
        return sum(1 for w in kube_server.writes if w.method == "POST" and w.path == pods)

    # The first refusal and two retries (2 s, then half the episode's age).
    await eventually(lambda: attempts() >= 3, "three refused pod creates", timeout=30)
    ws = await kube.get(WORKSPACES, "ws1", namespace)
    assert ws["status"]["reason"] == "PodAdmissionRefused"
    controller.process.send_signal(signal.SIGTERM)
    assert await controller.exit_code() == 0
    refused = controller.find("admission refused the workspace pod; retrying")
    assert (
        len(refused) == 1 and refused[0]["by"] == 'admission webhook "pods.wspin.llmsafespaces.dev"'
    )
    assert not [line for line in controller.lines if "Traceback" in str(line.get("error", ""))]
    assert not controller.find("reconcile failed; will retry")
    # Start, reconciles, shutdown: every line the process printed is one JSON object.
    assert controller.not_json == []
