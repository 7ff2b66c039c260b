"""The Workspace CRD keeps what the controller writes: every status field the reconciler and
the staging pass send (captured at the client, so the API server's pruning cannot hide a
gap) is declared in the CRD's structural schema, without relying on a preserve-unknown-fields
escape hatch. The Workspace goes through Pending → Active with staging armed, a health report
mirrored from a fake agentd, a rejection, a revocation and a token-expiry report."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from prometheus_client import CollectorRegistry

from controller.staging.health import HealthScraper
from controller.staging.ownership import WorkspaceNames
from controller.staging.staging_pass import RelayStagingPass
from controller.workspace.metrics import VerifyMetrics
from controller.workspace.reconciler import WorkspaceReconciler
from tests import stub_http as serving
from tests.controller.staging.conftest import Stage, two_providers
from tests.controller.workspace.conftest import SETTINGS, Harness, injected
from tests.controller.workspace.conftest import harness as harness
from tests.controller.workspace.factories import TEST_KEYS, ready_pod_status
from wspin.core.kinds import PODS, WORKSPACES, Resource
from wspin.kube.client import Kube

Obj = dict[str, Any]
CRD = Path(__file__).resolve().parents[3] / "charts/wspin/crds/workspaces.llmsafespaces.dev.yaml"


class RecordingKube(Kube):
    """A Kube that keeps every Workspace status body it sends."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(kube.api)
        self.statuses: list[Obj] = []

    async def patch(
        self, res: Resource, name: str, patch: Any, namespace: str | None = None, **kw: Any
    ) -> Obj:
        if res is WORKSPACES and kw.get("sub") == "status":
            self.statuses.append(patch.get("status") or {})
        return await super().patch(res, name, patch, namespace, **kw)

    async def replace(self, res: Resource, obj: Obj, *, sub: str = "") -> Obj:
        if res is WORKSPACES:
            self.statuses.append(obj.get("status") or {})
        return await super().replace(res, obj, sub=sub)


def status_schema() -> Obj:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = crd["spec"]["versions"]
    schema: Obj = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    return schema


def undeclared(value: Any, schema: Obj, path: str) -> list[str]:
    """Paths in ``value`` the schema does not declare (merge-patch nulls are deletions)."""
    if value is None:
        return []
    if isinstance(value, dict):
        declared = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        found: list[str] = []
        for key, child in value.items():
            if key in declared:
                found += undeclared(child, declared[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                found += undeclared(child, extra, f"{path}.{key}")
            else:
                found.append(f"{path}.{key}")
        return found
    if isinstance(value, list):
        items = schema.get("items") or {}
        return [p for i, item in enumerate(value) for p in undeclared(item, items, f"{path}[{i}]")]
    return []


def test_the_walk_finds_an_undeclared_field() -> None:
    schema = status_schema()
    written = {"phase": "Active", "secretsDelivery": {"relayRevision": "r1", "spawnedRev": "x"}}
    assert undeclared(written, schema, "status") == ["status.secretsDelivery.spawnedRev"]


@pytest.fixture
async def agentd_report() -> AsyncIterator[tuple[int, Obj]]:
    report: Obj = {}

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response(report)

    app = web.Application()
    app.router.add_get("/v1/healthz", healthz)
    runner, port = await serving.start(app, "127.0.0.1", 0)
    try:
        yield port, report
    finally:
        await runner.cleanup()


async def test_every_status_field_the_controller_writes_is_in_the_crd(
    harness: Harness, stage: Stage, agentd_report: tuple[int, Obj]
) -> None:
    port, report = agentd_report
    recording = RecordingKube(harness.kube)
    names = WorkspaceNames()
    harness.workspaces.add_handler(names.observe)
    health = HealthScraper(CollectorRegistry(), port=port)
    staging = RelayStagingPass(
        stage.config,
        recording,
        redactor=stage.redactor,
        relay=stage.staging.relay,
        source=stage.staging.source,
        clock=stage.clock,
        names=names,
        pods=harness.pods,
        health=health,
    )
    harness.reconciler = WorkspaceReconciler(
        recording,
        harness.workspaces,
        harness.pods,
        harness.pvcs,
        SETTINGS,
        keys=TEST_KEYS,
        metrics=VerifyMetrics(CollectorRegistry()),
        staging=staging,
    )
    try:
        stage.providers.bound["ws1"] = two_providers()
        await harness.apply(owner={"userID": "user-1"})
        await harness.reconcile()
        # The pod as the webhook admits it (delivery marker on), running at 127.0.0.1.
        pod_name = await harness.pod_name()
        pod = await harness.kube.get(PODS, pod_name, harness.namespace)
        wired = injected(pod)
        await harness.kube.delete(PODS, pod_name, harness.namespace, grace_seconds=0)
        await harness.synced(harness.pods, pod_name, None)
        del wired["metadata"]["resourceVersion"], wired["metadata"]["uid"]
        await harness.kube.create(PODS, wired, harness.namespace)
        await harness.set_pod_status(pod_name, ready_pod_status("127.0.0.1"))
        for _ in range(2):
            await harness.reconcile()
        revision = (await harness.workspace())["metadata"]["annotations"][
            "llmsafespaces.dev/relay-staged-revision"
        ]
        report.update(relayRevision=revision, relay={"degradedReason": "scope_violation"})
        await harness.reconcile()
        stage.providers.bound["ws1"] = two_providers()[:1]
        await harness.reconcile()
        report["relay"] = {"degradedReason": "token_expired"}
        await harness.reconcile()

        assert any("secretsDelivery" in s for s in recording.statuses), "no health mirrored"
        written = [c["type"] for s in recording.statuses for c in s.get("conditions") or []]
        assert {"CredentialsStaged", "CredentialStale", "CredentialRejected"} <= set(written)
        schema = status_schema()
        gaps = sorted({p for s in recording.statuses for p in undeclared(s, schema, "status")})
        assert gaps == [], f"status fields written but not declared in the CRD: {gaps}"
        live = await harness.workspace()
        assert live["status"]["secretsDelivery"] == {
            "relayRevision": revision,
            "degradedReason": "token_expired",
        }
    finally:
        await health.close()
        await staging.router.session.close()
