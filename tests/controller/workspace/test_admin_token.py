"""agentd's admin token, end to end on every golden pod: the value agentd is given (from the
workspace's Secret, as a 0400 file in single-container mode or as the sidecar's env) is the
bearer the kubelet's probes send, a stub agentd answers those probes 200 (and 401 without the
bearer), and no uid-1000 container ever holds the token in its env or in a volume.

The stub plays agentd's admin port at the test boundary: ``/v1/healthz`` open,
``/v1/readyz`` and ``/v1/statusz`` only with ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
import yaml
from aiohttp import web

from controller.workspace.pod.builder import desired_pod
from controller.workspace.pod.containers import ADMIN_TOKEN_FILE, ADMIN_TOKEN_FILE_ENV
from controller.workspace.pod.credentials import (
    ADMIN_TOKEN,
    AGENTD_PASSWORD,
    desired_password_secret,
)
from tests import stub_http as serving
from tests.controller.workspace.factories import credentials
from tests.controller.workspace.pod_cases import CASES, TESTDATA, load
from wspin.core.objects import Obj

GATED = ("/v1/readyz", "/v1/statusz")


class StubAgentd:
    """agentd's admin API with one token, counting what it answered."""

    def __init__(self) -> None:
        self.token = ""
        self.answers: list[int] = []

    async def handle(self, request: web.Request) -> web.Response:
        gated = request.path in GATED
        if gated and request.headers.get("Authorization") != f"Bearer {self.token}":
            self.answers.append(401)
            return web.Response(status=401, headers={"WWW-Authenticate": 'Bearer realm="agentd"'})
        self.answers.append(200)
        return web.json_response({"healthy": True, "ready": True})


@pytest.fixture
async def agentd() -> AsyncIterator[tuple[StubAgentd, str]]:
    stub = StubAgentd()
    app = web.Application()
    for path in ("/v1/healthz", *GATED):
        app.router.add_get(path, stub.handle)
    runner, port = await serving.start(app, "127.0.0.1", 0)
    try:
        yield stub, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def golden_pods() -> list[tuple[str, Obj, Obj]]:
    """(case/stage, Workspace, pod) for every golden pod and injected pod, and every pod as
    ``desired_pod`` builds it now: a refreshed golden must not be what makes these pass."""
    found = []
    for case in CASES:
        ws, settings = load(case)
        for stage in ("pod", "injected"):
            pod = yaml.safe_load((TESTDATA / f"{case}.yaml.{stage}").read_text())
            found.append((f"{case}.{stage}", ws, pod))
        found.append((f"{case}.built", ws, desired_pod(ws, settings, credentials=credentials(ws))))
    return found


GOLDEN = golden_pods()


def containers(pod: Obj) -> list[Obj]:
    return [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]


def uid_of(pod: Obj, container: Obj) -> int:
    own = (container.get("securityContext") or {}).get("runAsUser")
    return int(own if own is not None else pod["spec"]["securityContext"]["runAsUser"])


def token_given_to_agentd(pod: Obj, ws: Obj) -> str:
    """The admin token agentd boots with, followed from the pod spec to the Secret: the
    sidecar's ``AGENTD_ADMIN_TOKEN`` env, else the file ``platform-init`` installs from the
    password Secret volume's ``admin-token`` item."""
    secret = desired_password_secret(ws, credentials(ws))["stringData"]
    by_name = {c["name"]: c for c in containers(pod)}
    if "agentd" in by_name:
        (ref,) = [
            e["valueFrom"]["secretKeyRef"]
            for e in by_name["agentd"]["env"]
            if e["name"] == "AGENTD_ADMIN_TOKEN"
        ]
        assert ref["name"] == "workspace-pw-ws1"
        return str(secret[ref["key"]])
    main = by_name["workspace"]
    assert {"name": ADMIN_TOKEN_FILE_ENV, "value": ADMIN_TOKEN_FILE} in main["env"]
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "pw-secret"]
    (item,) = [i for i in volume["secret"]["items"] if i["path"] == "admin-token"]
    return str(secret[item["key"]])


async def kubelet_probe(session: aiohttp.ClientSession, base: str, probe: Obj) -> int:
    """Send ``probe`` as the kubelet does: its path and its headers, nothing else."""
    action = probe["httpGet"]
    headers = {h["name"]: h["value"] for h in action.get("httpHeaders") or []}
    async with session.get(base + action["path"], headers=headers) as response:
        return response.status


@pytest.mark.parametrize(("case", "ws", "pod"), GOLDEN, ids=[g[0] for g in GOLDEN])
async def test_every_probe_of_every_golden_pod_passes_against_agentd(
    agentd: tuple[StubAgentd, str], case: str, ws: Obj, pod: Obj
) -> None:
    stub, base = agentd
    stub.token = token_given_to_agentd(pod, ws)
    assert stub.token == credentials(ws).admin_token
    async with aiohttp.ClientSession() as session:
        probed = 0
        for container in containers(pod):
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                probe = container.get(kind)
                if not probe or "httpGet" not in probe:
                    continue
                assert await kubelet_probe(session, base, probe) == 200, (container["name"], kind)
                bearer = any(
                    h["name"] == "Authorization" for h in probe["httpGet"].get("httpHeaders") or []
                )
                assert bearer == (probe["httpGet"]["path"] in GATED), (container["name"], kind)
                probed += 1
        assert probed >= 3
        # Without the bearer agentd refuses: the header is what makes the pod Ready.
        async with session.get(base + "/v1/readyz") as refused:
            assert refused.status == 401


@pytest.mark.parametrize(("case", "ws", "pod"), GOLDEN, ids=[g[0] for g in GOLDEN])
def test_no_uid_1000_container_holds_the_token_in_env_or_a_volume(
    case: str, ws: Obj, pod: Obj
) -> None:
    """Rule: no container running as uid 1000 (tenant code's uid) is given the admin token as
    env, and only ``platform-init`` mounts the password Secret; in sidecar mode the token is
    not even projected there. Checked on the pods ``desired_pod`` builds now (``.built``), not
    only on stored goldens."""
    token = credentials(ws).admin_token
    sidecar = any(c["name"] == "agentd" for c in containers(pod))
    for container in containers(pod):
        if uid_of(pod, container) != 1000:
            continue
        for env in container.get("env") or []:
            assert env["name"] != "AGENTD_ADMIN_TOKEN", container["name"]
            assert env.get("value") != token, container["name"]
            ref = (env.get("valueFrom") or {}).get("secretKeyRef") or {}
            assert ref.get("key") not in (ADMIN_TOKEN, AGENTD_PASSWORD), container["name"]
        if sidecar:
            assert ADMIN_TOKEN_FILE_ENV not in {e["name"] for e in container.get("env") or []}
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "pw-secret"]
    projected = {item["key"] for item in volume["secret"]["items"]}
    assert AGENTD_PASSWORD not in projected
    assert (ADMIN_TOKEN in projected) is (not sidecar), "sidecar mode: the token is uid 2000's"
    holders = {
        c["name"]
        for c in containers(pod)
        for m in c.get("volumeMounts") or []
        if m["name"] == "pw-secret"
    }
    assert holders == {"platform-init"}


def test_a_sidecar_pod_gives_the_sidecar_its_three_credentials_as_env() -> None:
    pod = yaml.safe_load((TESTDATA / "sidecar.yaml.pod").read_text())
    (sidecar,) = [c for c in pod["spec"]["initContainers"] if c["name"] == "agentd"]
    assert uid_of(pod, sidecar) == 2000
    refs = {
        e["name"]: e["valueFrom"]["secretKeyRef"]["key"]
        for e in sidecar["env"]
        if "valueFrom" in e and "secretKeyRef" in e["valueFrom"]
    }
    assert refs == {
        "AGENTD_SIDECAR_PASSWORD": "password",
        "AGENTD_ADMIN_TOKEN": ADMIN_TOKEN,
        "AGENTD_CONTROL_PLANE_PASSWORD": AGENTD_PASSWORD,
    }
