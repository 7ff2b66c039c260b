"""One owner per relay identity: two same-named Workspaces in two namespaces with staging
armed. The first keeps its envelope and key; the second reports NameConflict and never
touches the first's objects, whether it is staged, cleaned up, or carries a copy of the
first's bookkeeping; when the owner goes, the second takes the name over with its own key.
The index the pass asks is fed by a real Workspace informer, as in the controller."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import pytest

from controller.staging.conditions import EVENT_NAME_CONFLICT as NAME_CONFLICT
from controller.staging.desired import LEGACY_ANNOTATIONS, STAGED_FOR, STATUS_FIELD, recorded
from controller.staging.handoff import handoff_name
from controller.staging.ownership import (
    LABEL_WORKSPACE_NAMESPACE,
    LABEL_WORKSPACE_UID,
    Claimant,
    WorkspaceNames,
)
from controller.staging.staging_pass import RelayStagingPass
from controller.types import ObjectKey
from tests.controller.staging.conftest import Stage, condition, provider
from tests.support.owners import recorded as owner_recorded
from tests.support.waiting import eventually
from wspin.core.kinds import EVENTS, NAMESPACES, SECRETS, WORKSPACES
from wspin.core.objects import Obj
from wspin.kube.client import Kube
from wspin.kube.informer import Informer

KEY_A = "sk-tenant-a-0123456789-secret"
KEY_B = "sk-tenant-b-9876543210-secret"
KEY_B2 = "sk-ant-tenant-b-extra-secret"


@dataclass
class Tenants:
    a: Stage
    b: Stage
    names: WorkspaceNames
    informer: Informer
    name: str

    async def create(
        self, stage: Stage, owner: str, annotations: dict[str, str] | None = None
    ) -> Obj:
        body: Obj = {
            "metadata": {"name": self.name, "namespace": stage.namespace},
            "spec": {"runtime": "python", "owner": {"userID": owner}},
        }
        owner_recorded(body)
        if annotations:
            body["metadata"]["annotations"].update(annotations)
        created = await stage.kube.create(WORKSPACES, body)
        await self.seen(stage, created)
        return created

    async def seen(self, stage: Stage, obj: Obj) -> None:
        """Wait until the informer (and so the index) holds ``obj``'s version."""
        version = int(obj["metadata"]["resourceVersion"])

        def caught_up() -> bool:
            cached = self.informer.get(ObjectKey(stage.namespace, self.name))
            return cached is not None and int(cached["metadata"]["resourceVersion"]) >= version

        await eventually(caught_up, f"the informer to see {stage.namespace}/{self.name}")

    async def run(self, stage: Stage) -> Any:
        report = await stage.run(self.name)
        await self.seen(stage, await stage.get(self.name))
        return report

    async def delete(self, stage: Stage) -> None:
        await stage.kube.delete(WORKSPACES, self.name, stage.namespace)

        def gone() -> bool:
            return all(c.namespace != stage.namespace for c in self.names.named(self.name))

        await eventually(gone, f"the index to drop {stage.namespace}/{self.name}")


@pytest.fixture
async def tenants(stage: Stage, kube: Kube, real_cluster: bool) -> AsyncIterator[Tenants]:
    other = f"wspin-test-{uuid.uuid4().hex[:10]}"
    await kube.create(NAMESPACES, {"metadata": {"name": other, "labels": {"wspin-test": "1"}}})
    names = WorkspaceNames()
    informer = Informer(kube, WORKSPACES)
    informer.add_handler(names.observe)
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.wait_synced(), 10)
    staging = RelayStagingPass(
        stage.config,
        kube,
        redactor=stage.redactor,
        relay=stage.staging.relay,
        source=stage.staging.source,
        clock=stage.clock,
        names=names,
    )
    a = replace(stage, staging=staging)
    b = replace(stage, staging=staging, namespace=other)
    try:
        yield Tenants(a, b, names, informer, f"ws-{uuid.uuid4().hex[:8]}")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await staging.router.session.close()
        if real_cluster:
            await kube.delete(NAMESPACES, other)


async def envelope_state(stage: Stage, name: str, slug: str) -> tuple[str, str, bytes]:
    """(resourceVersion, owner uid label, opened key) of an envelope."""
    secret = await stage.envelope_secret(slug, name)
    assert secret is not None, f"no envelope for {name}/{slug}"
    opened = stage.router.state.open(await stage.envelope(slug, name))
    return (
        secret["metadata"]["resourceVersion"],
        secret["metadata"]["labels"][LABEL_WORKSPACE_UID],
        opened,
    )


async def conflict_events(stage: Stage) -> list[Obj]:
    listing = await stage.kube.list(EVENTS, stage.namespace)
    return [e for e in listing.get("items", []) if e.get("reason") == NAME_CONFLICT]


def bind(tenants: Tenants) -> None:
    bound = tenants.a.providers.bound_for
    bound[(tenants.name, "user-a")] = [provider("openai", "openai", KEY_A, models=("gpt-4o",))]
    bound[(tenants.name, "user-b")] = [
        provider("openai", "openai", KEY_B, models=("gpt-4o",)),
        provider("anthropic", "anthropic", KEY_B2),
    ]


async def test_the_first_keeps_its_key_and_the_second_reports_name_conflict(
    tenants: Tenants,
) -> None:
    bind(tenants)
    a, b, name = tenants.a, tenants.b, tenants.name
    first = await tenants.create(a, "user-a")
    await tenants.run(a)
    before = await envelope_state(a, name, "openai")
    assert before[1:] == (first["metadata"]["uid"], KEY_A.encode())
    labels = (await a.envelope_secret("openai", name) or {})["metadata"]["labels"]
    assert labels[LABEL_WORKSPACE_NAMESPACE] == a.namespace
    mints = a.mints()

    await tenants.create(b, "user-b")
    report = await tenants.run(b)
    report_again = await tenants.run(b)

    staged = condition(await b.get(name), "CredentialsStaged")
    assert staged is not None and (staged["status"], staged["reason"]) == ("False", "NameConflict")
    assert a.namespace in staged["message"]
    for text in (staged["message"], *(c["message"] for c in report.conditions)):
        assert KEY_A not in text and KEY_B not in text
    assert report_again.requeue_after is not None  # looked at again without an event
    assert await envelope_state(a, name, "openai") == before
    assert await a.envelope_secret("anthropic", name) is None
    assert a.mints() == mints
    assert await b.handoff_raw(name) is None
    assert [r for r in a.providers.requests if r[1] == "user-b"] == []
    assert len(await conflict_events(b)) == 1, "one Warning Event per episode"
    ws_b = await b.get(name)
    assert recorded(ws_b) == {}

    # The owner's own passes go on undisturbed.
    await tenants.run(a)
    assert await envelope_state(a, name, "openai") == before


async def test_deleting_the_second_never_touches_the_first(tenants: Tenants) -> None:
    bind(tenants)
    a, b, name = tenants.a, tenants.b, tenants.name
    await tenants.create(a, "user-a")
    await tenants.run(a)
    before = await envelope_state(a, name, "openai")
    handoff = await a.handoff_raw(name)
    await tenants.create(b, "user-b")
    await tenants.run(b)

    await b.staging.cleanup(await b.get(name))
    await tenants.delete(b)

    assert await envelope_state(a, name, "openai") == before
    assert await a.handoff_raw(name) == handoff


async def test_deleting_the_first_spares_the_second_which_then_stages_its_own_key(
    tenants: Tenants,
) -> None:
    bind(tenants)
    a, b, name = tenants.a, tenants.b, tenants.name
    await tenants.create(a, "user-a")
    await tenants.run(a)
    second = await tenants.create(b, "user-b")
    await tenants.run(b)
    ws_b_before = await b.get(name)

    await a.staging.cleanup(await a.get(name))
    assert await a.envelope_secret("openai", name) is None
    ws_b_after = await b.get(name)
    assert ws_b_after["metadata"]["resourceVersion"] == ws_b_before["metadata"]["resourceVersion"]
    await tenants.delete(a)

    await tenants.run(b)
    staged = condition(await b.get(name), "CredentialsStaged")
    assert staged is not None and staged["status"] == "True"
    _, uid, opened = await envelope_state(b, name, "openai")
    assert (uid, opened) == (second["metadata"]["uid"], KEY_B.encode())
    handoff = await b.kube.get(SECRETS, handoff_name(name), b.namespace)
    assert handoff["metadata"]["labels"][LABEL_WORKSPACE_UID] == second["metadata"]["uid"]


async def test_a_copy_of_the_owners_bookkeeping_neither_deletes_nor_reuses_its_envelopes(
    tenants: Tenants,
) -> None:
    """An earlier release kept the bookkeeping in annotations, which ``kubectl get -o yaml``
    of the owner, applied in another namespace, carries along: they must not make the copy
    revoke, clean up or trust the owner's envelopes."""
    bind(tenants)
    a, b, name = tenants.a, tenants.b, tenants.name
    await tenants.create(a, "user-a")
    await tenants.run(a)
    owner = await a.get(name)
    record = recorded(owner)
    copied = dict(
        zip(
            LEGACY_ANNOTATIONS,
            (record["sealedGeneration"], record["stagedRevision"], record["providers"]),
            strict=False,
        )
    )
    copied[LEGACY_ANNOTATIONS[3]] = record[STAGED_FOR]
    before = await envelope_state(a, name, "openai")

    await tenants.create(b, "user-b", annotations={**copied})
    await tenants.run(b)
    await b.staging.cleanup(await b.get(name))
    assert await envelope_state(a, name, "openai") == before

    # With the owner gone the copy stages, and seals its own key rather than trusting the
    # copied digests.
    await a.staging.cleanup(await a.get(name))
    await tenants.delete(a)
    tenants.a.providers.bound_for[(name, "user-b")] = [
        provider("openai", "openai", KEY_A, models=("gpt-4o",))  # the same value as the owner's
    ]
    await tenants.run(b)
    ws_b = await b.get(name)
    assert recorded(ws_b)[STAGED_FOR] == f"{b.namespace}/{ws_b['metadata']['uid']}"
    assert not set(LEGACY_ANNOTATIONS) & set(ws_b["metadata"].get("annotations") or {})
    _, uid, _ = await envelope_state(b, name, "openai")
    assert uid == ws_b["metadata"]["uid"]


class TestTheOwner:
    @staticmethod
    def claimant(created: str, uid: str, namespace: str, *, staged: bool = False) -> Obj:
        record = {STATUS_FIELD: {STAGED_FOR: f"{namespace}/{uid}"}} if staged else {}
        return {
            "metadata": {
                "name": "ws1",
                "namespace": namespace,
                "uid": uid,
                "creationTimestamp": created,
            },
            "status": record,
        }

    def test_the_oldest_owns_the_name(self) -> None:
        names = WorkspaceNames()
        old = self.claimant("2026-12-01T10:00:00Z", "ffff", "team-a")
        new = self.claimant("2026-12-01T10:00:01Z", "0000", "team-b")
        for ws in (old, new):
            names.observe("ADDED", ws, None)
        assert names.conflict(old) is None
        holder = names.conflict(new)
        assert holder is not None and holder.namespace == "team-a"

    def test_within_one_second_the_staged_one_wins_then_the_smaller_uid(self) -> None:
        names = WorkspaceNames()
        staged = self.claimant("2026-12-01T10:00:00Z", "ffff", "team-a", staged=True)
        fresh = self.claimant("2026-12-01T10:00:00Z", "0000", "team-b")
        for ws in (staged, fresh):
            names.observe("ADDED", ws, None)
        assert names.conflict(staged) is None
        assert names.conflict(fresh) == Claimant.of(staged)
        neither = self.claimant("2026-12-01T10:00:00Z", "0000", "team-a")
        other = self.claimant("2026-12-01T10:00:00Z", "1111", "team-c")
        assert WorkspaceNames().conflict(neither) is None
        pair = WorkspaceNames()
        pair.observe("ADDED", neither, None)
        assert pair.conflict(other) == Claimant.of(neither)

    def test_a_staging_mark_copied_from_another_workspace_does_not_count(self) -> None:
        forged = self.claimant("2026-12-01T10:00:00Z", "0000", "team-b")
        forged["status"] = {STATUS_FIELD: {STAGED_FOR: "team-a/ffff"}}
        assert Claimant.of(forged).unstaged
        annotated = self.claimant("2026-12-01T10:00:00Z", "0000", "team-b")
        annotated["metadata"]["annotations"] = {LEGACY_ANNOTATIONS[3]: "team-b/0000"}
        assert Claimant.of(annotated).unstaged, "a tenant's annotation is no staging mark"

    def test_a_deleted_owner_hands_the_name_on(self) -> None:
        names = WorkspaceNames()
        old = self.claimant("2026-12-01T10:00:00Z", "ffff", "team-a")
        new = self.claimant("2026-12-01T10:00:05Z", "0000", "team-b")
        for ws in (old, new):
            names.observe("ADDED", ws, None)
        names.observe("DELETED", old, old)
        assert names.conflict(new) is None
        assert names.named("ws1") == [Claimant.of(new)]

    def test_a_workspace_the_index_has_not_seen_is_still_compared(self) -> None:
        names = WorkspaceNames()
        old = self.claimant("2026-12-01T10:00:00Z", "ffff", "team-a")
        names.observe("ADDED", old, None)
        late = self.claimant("2026-12-01T09:00:00Z", "0000", "team-b")
        assert names.conflict(late) is None  # older than every holder: it owns the name
