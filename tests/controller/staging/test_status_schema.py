"""The Workspace CRD keeps what the controller writes: every status field the reconciler and
the staging pass send (captured at the client, so the API server's pruning cannot hide a
gap) is declared in the CRD's structural schema, without relying on a preserve-unknown-fields
escape hatch. The Workspace goes through Pending → Active with staging armed, a health report
mirrored from a stub agentd by the agent scheduler, a rejection, a revocation and a
token-expiry report."""

from __future__ import annotations

from controller.staging.ownership import WorkspaceNames
from controller.staging.staging_pass import RelayStagingPass
from controller.workspace.reconcile.reconciler import WorkspaceReconciler
from tests.controller.staging.conftest import Stage, two_providers
from tests.controller.status_schema import RecordingKube, status_schema, undeclared
from tests.controller.workspace.agents import FIRST_READS, Agents, agents, harness, settings
from tests.controller.workspace.conftest import reconcile_deps
from tests.support.agentd import healthy_health

__all__ = ["agents", "harness"]


def test_the_walk_finds_an_undeclared_field() -> None:
    schema = status_schema()
    written = {"phase": "Active", "secretsDelivery": {"relayRevision": "r1", "appliedBy": "x"}}
    assert undeclared(written, schema, "status") == ["status.secretsDelivery.appliedBy"]


async def test_every_status_field_the_controller_writes_is_in_the_crd(
    agents: Agents, stage: Stage
) -> None:
    harness = agents.h
    recording = RecordingKube(harness.kube)
    names = WorkspaceNames()
    harness.workspaces.add_handler(names.observe)
    staging = RelayStagingPass(
        stage.config,
        recording,
        redactor=stage.redactor,
        relay=stage.staging.relay,
        source=stage.staging.source,
        clock=stage.clock,
        names=names,
    )
    harness.reconciler = WorkspaceReconciler(
        reconcile_deps(
            recording,
            harness.workspaces,
            harness.pods,
            harness.pvcs,
            settings(agents.stub.port),
            staging=staging,
            clock=agents.clock,
            agents=agents.scheduler,
        )
    )
    try:
        stage.providers.bound["ws1"] = two_providers()
        # Active on a pod as the webhook admits it (delivery marker on), at 127.0.0.1.
        agent = await agents.active(owner={"userID": "user-1"})
        revision = (await harness.workspace())["status"]["relayStaging"]["stagedRevision"]
        agent.health = healthy_health(
            relayRevision=revision, relay={"degradedReason": "scope_violation"}
        )
        await agents.advance(FIRST_READS)
        stage.providers.bound["ws1"] = two_providers()[:1]
        await harness.reconcile()
        agent.health = healthy_health(relay={"degradedReason": "token_expired"})
        agent.health["relayRevision"] = revision
        await agents.advance(15)

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
        await staging.router.session.close()
