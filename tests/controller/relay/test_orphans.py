"""The orphan detector: only tagged, owner-less, live VMs past the grace are destroyed."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controller.relay.drivers.base import TAG_TOKEN_REF, TokenSlot, TransientCloudError
from controller.relay.drivers.fake import FakeCloud
from controller.relay.identity import ClusterIdentity
from controller.relay.metrics import RelayMetrics
from controller.relay.orphans import OrphanDetector, OrphanPolicy
from tests.controller.relay.conftest import AWS_SLOT, CLUSTER, OCI_SLOT
from tests.support.clock import FakeClock
from wspin.core.kinds import INFERENCE_RELAYS
from wspin.kube.client import Kube

OLD = 3600.0


@pytest.fixture
async def relays(kube: Kube) -> AsyncIterator[list[dict[str, Any]]]:
    """Creates CRs on demand (``await make(...)`` via the list's helper) and removes them."""
    created: list[dict[str, Any]] = []
    yield created
    for cr in created:
        await kube.delete(INFERENCE_RELAYS, cr["metadata"]["name"])


async def _relay(kube: Kube, created: list[dict[str, Any]], *slots: dict[str, Any]) -> str:
    body = {
        "metadata": {"name": f"orphans-{uuid.uuid4().hex[:8]}"},
        "spec": {"upstreamURL": "https://u.example", "providers": list(slots or [AWS_SLOT])},
    }
    cr = await kube.create(INFERENCE_RELAYS, body)
    created.append(cr)
    return str(cr["metadata"]["uid"])


def _detector(
    kube: Kube,
    clouds: dict[str, FakeCloud],
    clock: FakeClock,
    metrics: RelayMetrics,
    **policy: Any,
) -> OrphanDetector:
    return OrphanDetector(
        kube, dict(clouds), metrics, ClusterIdentity(None, CLUSTER),
        policy=OrphanPolicy(**policy), clock=clock, regions={"aws": ["us-east-1"]},
    )  # fmt: skip


async def test_an_empty_cloud_gives_an_empty_sweep(
    kube: Kube, aws: FakeCloud, clock: FakeClock, metrics: RelayMetrics
) -> None:
    result = await _detector(kube, {"aws": aws}, clock, metrics).sweep()
    assert result.destroyed == [] and result.skipped == ""
    assert aws.calls_of("destroy") == []


async def test_only_a_vm_with_an_unknown_owner_is_destroyed(
    kube: Kube,
    aws: FakeCloud,
    clock: FakeClock,
    metrics: RelayMetrics,
    relays: list[dict[str, Any]],
) -> None:
    uid = await _relay(kube, relays)
    owned = aws.seed("us-east-1", cluster=CLUSTER, owner_uid=uid, provider="aws", age_seconds=OLD)
    orphan = aws.seed(
        "us-east-1", cluster=CLUSTER, owner_uid="gone-uid", provider="aws", age_seconds=OLD
    )
    legacy = aws.seed("us-east-1", age_seconds=OLD)
    untagged = aws.seed(
        "us-east-1", cluster=CLUSTER, owner_uid="gone-uid", managed=False, age_seconds=OLD
    )
    stopped = aws.seed(
        "us-east-1", cluster=CLUSTER, owner_uid="gone-uid", state="stopped", age_seconds=OLD
    )
    dead = aws.seed(
        "us-east-1", cluster=CLUSTER, owner_uid="gone-uid", state="terminated", age_seconds=OLD
    )
    result = await _detector(kube, {"aws": aws}, clock, metrics).sweep()
    assert result.destroyed == [orphan]
    assert aws.live_ids() == {owned, legacy, untagged}
    assert {c.args["instance_id"] for c in aws.calls_of("destroy")} == {orphan}
    assert stopped not in result.destroyed and dead not in result.destroyed
    assert (
        metrics.registry.get_sample_value(
            "llmsafespaces_relay_orphans_destroyed_total",
            {"provider": "aws", "outcome": "destroyed"},
        )
        == 1
    )


async def test_an_orphans_stored_token_goes_with_it_and_an_owned_vms_stays(
    kube: Kube,
    aws: FakeCloud,
    clock: FakeClock,
    metrics: RelayMetrics,
    relays: list[dict[str, Any]],
) -> None:
    uid = await _relay(kube, relays)
    refs = {}
    for owner in (uid, "gone-uid"):
        where = TokenSlot(owner_uid=owner, launch=owner[:4] * 16, region="us-east-1", tags={})
        refs[owner] = (await aws.store_token(where, "t" * 64)).reference
    owned = aws.seed(
        "us-east-1", cluster=CLUSTER, owner_uid=uid, provider="aws", age_seconds=OLD,
        tags={TAG_TOKEN_REF: refs[uid]},
    )  # fmt: skip
    orphan = aws.seed(
        "us-east-1", cluster=CLUSTER, owner_uid="gone-uid", provider="aws", age_seconds=OLD,
        tags={TAG_TOKEN_REF: refs["gone-uid"]},
    )  # fmt: skip
    result = await _detector(kube, {"aws": aws}, clock, metrics).sweep()
    assert result.destroyed == [orphan]
    assert aws.token_of(owned) == "t" * 64
    assert set(aws.tokens) == {refs[uid]}


async def test_a_young_orphan_waits_for_the_grace(
    kube: Kube, aws: FakeCloud, clock: FakeClock, metrics: RelayMetrics
) -> None:
    young = aws.seed("us-east-1", cluster=CLUSTER, owner_uid="gone-uid", age_seconds=60)
    detector = _detector(kube, {"aws": aws}, clock, metrics, grace_seconds=600)
    assert (await detector.sweep()).destroyed == []
    clock.advance(541)
    assert (await detector.sweep()).destroyed == [young]


async def test_a_vm_whose_launch_time_is_unknown_gets_the_grace_from_its_first_sighting(
    kube: Kube, aws: FakeCloud, clock: FakeClock, metrics: RelayMetrics
) -> None:
    """No launch time is no proof of age: such a VM waits the whole grace from the first
    sweep that saw it, never destroyed at once."""
    unknown = aws.seed(
        "us-east-1", cluster=CLUSTER, owner_uid="gone-uid", age_seconds=OLD,
        launch_time_known=False,
    )  # fmt: skip
    detector = _detector(kube, {"aws": aws}, clock, metrics, grace_seconds=600)
    assert (await detector.sweep()).destroyed == []
    clock.advance(599)
    assert (await detector.sweep()).destroyed == []
    assert unknown in aws.live_ids()
    clock.advance(1)
    assert (await detector.sweep()).destroyed == [unknown]


async def test_a_new_detector_starts_the_grace_of_an_unknown_launch_time_over(
    kube: Kube, aws: FakeCloud, clock: FakeClock, metrics: RelayMetrics
) -> None:
    """A restart or a new leader remembers no sighting: the grace starts again (the safe
    direction), and a VM that left the listing is forgotten."""
    unknown = aws.seed("us-east-1", cluster=CLUSTER, owner_uid="gone-uid", launch_time_known=False)
    first = _detector(kube, {"aws": aws}, clock, metrics, grace_seconds=600)
    await first.sweep()
    clock.advance(600)
    assert (
        await _detector(kube, {"aws": aws}, clock, metrics, grace_seconds=600).sweep()
    ).destroyed == []
    aws.vm(unknown).terminated_at = clock()
    await first.sweep()
    aws.vm(unknown).terminated_at = None
    assert (await first.sweep()).destroyed == []


async def test_dry_run_reports_without_destroying(
    kube: Kube, aws: FakeCloud, clock: FakeClock, metrics: RelayMetrics
) -> None:
    orphan = aws.seed("us-east-1", cluster=CLUSTER, owner_uid="gone-uid", age_seconds=OLD)
    result = await _detector(kube, {"aws": aws}, clock, metrics, dry_run=True).sweep()
    assert result.destroyed == [orphan]
    assert aws.calls_of("destroy") == [] and aws.live_ids() == {orphan}


async def test_a_sweep_destroys_at_most_its_limit_and_defers_the_rest(
    kube: Kube, aws: FakeCloud, clock: FakeClock, metrics: RelayMetrics
) -> None:
    for _ in range(5):
        aws.seed("us-east-1", cluster=CLUSTER, owner_uid="gone-uid", age_seconds=OLD)
    detector = _detector(kube, {"aws": aws}, clock, metrics, max_deletions=2)
    first = await detector.sweep()
    assert len(first.destroyed) == 2 and len(first.deferred) == 3
    assert len(aws.live_ids()) == 3


async def test_a_failed_destroy_counts_against_the_per_sweep_cap(
    kube: Kube, aws: FakeCloud, clock: FakeClock, metrics: RelayMetrics
) -> None:
    """The cap bounds destroy calls, not successes: a cloud answering errors is not hammered."""
    aws.inject("destroy", TransientCloudError("API down"), times=10)
    for _ in range(5):
        aws.seed("us-east-1", cluster=CLUSTER, owner_uid="gone-uid", age_seconds=OLD)
    result = await _detector(kube, {"aws": aws}, clock, metrics, max_deletions=2).sweep()
    assert len(result.failed) == 2 and len(result.deferred) == 3
    assert len(aws.calls_of("destroy")) == 2


async def test_a_list_error_in_one_place_does_not_stop_the_others(
    kube: Kube,
    aws: FakeCloud,
    oci: FakeCloud,
    clock: FakeClock,
    metrics: RelayMetrics,
    relays: list[dict[str, Any]],
) -> None:
    await _relay(kube, relays, OCI_SLOT)
    aws.inject("list", TransientCloudError("throttled"))
    orphan = oci.seed("us-ashburn-1", cluster=CLUSTER, owner_uid="gone-uid", age_seconds=OLD)
    aws.seed("us-east-1", cluster=CLUSTER, owner_uid="gone-uid", age_seconds=OLD)
    result = await _detector(kube, {"aws": aws, "oci": oci}, clock, metrics).sweep()
    assert result.destroyed == [orphan]


async def test_a_destroy_error_does_not_stop_the_sweep(
    kube: Kube, aws: FakeCloud, clock: FakeClock, metrics: RelayMetrics
) -> None:
    aws.inject("destroy", TransientCloudError("API down"), times=2)
    first = aws.seed("us-east-1", cluster=CLUSTER, owner_uid="gone-a", age_seconds=OLD)
    second = aws.seed("us-east-1", cluster=CLUSTER, owner_uid="gone-b", age_seconds=OLD)
    result = await _detector(kube, {"aws": aws}, clock, metrics).sweep()
    assert sorted(result.failed) == sorted([first, second])
    assert len(aws.calls_of("destroy")) == 2


async def test_every_region_of_every_relay_and_the_extra_regions_are_swept(
    kube: Kube,
    aws: FakeCloud,
    oci: FakeCloud,
    clock: FakeClock,
    metrics: RelayMetrics,
    relays: list[dict[str, Any]],
) -> None:
    await _relay(kube, relays, AWS_SLOT | {"region": "eu-west-1"}, OCI_SLOT)
    await _detector(kube, {"aws": aws, "oci": oci}, clock, metrics).sweep()
    assert {c.args["region"] for c in aws.calls_of("list")} == {"eu-west-1", "us-east-1"}
    assert {c.args["region"] for c in oci.calls_of("list")} == {"us-ashburn-1"}


async def test_a_relay_created_during_the_sweep_keeps_its_vm(
    kube: Kube,
    aws: FakeCloud,
    clock: FakeClock,
    metrics: RelayMetrics,
    relays: list[dict[str, Any]],
) -> None:
    """The race the sandwich exists for: the CR appears after pass 1, its VM during pass 2."""
    seeded: list[str] = []

    async def create_during_listing(_: str) -> None:
        if not seeded:
            uid = await _relay(kube, relays)
            seeded.append(aws.seed("us-east-1", cluster=CLUSTER, owner_uid=uid, age_seconds=OLD))

    aws.on_list = create_during_listing
    result = await _detector(kube, {"aws": aws}, clock, metrics).sweep()
    assert result.destroyed == [] and aws.live_ids() == set(seeded)


async def test_a_failing_relay_list_skips_the_sweep(
    kube: Kube, aws: FakeCloud, clock: FakeClock, metrics: RelayMetrics, kube_server: Any
) -> None:
    aws.seed("us-east-1", cluster=CLUSTER, owner_uid="gone-uid", age_seconds=OLD)
    kube_server.fail_next(
        500, method="GET", path="/apis/llmsafespaces.dev/v1/inferencerelays", count=2
    )
    result = await _detector(kube, {"aws": aws}, clock, metrics).sweep()
    assert result.skipped and aws.calls_of("destroy") == []


async def test_a_vm_of_another_cluster_is_never_destroyed(
    kube: Kube, aws: FakeCloud, clock: FakeClock, metrics: RelayMetrics
) -> None:
    """Another cluster's CRs are invisible here, so its VMs' owners always look gone."""
    theirs = aws.seed("us-east-1", cluster="cluster-b", owner_uid="their-uid", age_seconds=OLD)
    result = await _detector(kube, {"aws": aws}, clock, metrics).sweep()
    assert result.destroyed == [] and result.unclaimed == []
    assert aws.live_ids() == {theirs} and aws.calls_of("destroy") == []


async def test_a_vm_without_a_cluster_tag_is_reported_once_per_sweep_never_destroyed(
    kube: Kube,
    aws: FakeCloud,
    clock: FakeClock,
    metrics: RelayMetrics,
    relays: list[dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    uid = await _relay(kube, relays)
    legacy = aws.seed("us-east-1", owner_uid="gone-uid", provider="aws", age_seconds=OLD)
    aws.seed("us-east-1", owner_uid=uid, provider="aws", age_seconds=OLD)  # ours, adopted
    detector = _detector(kube, {"aws": aws}, clock, metrics)
    for _ in range(2):
        caplog.clear()
        result = await detector.sweep()
        assert result.unclaimed == [legacy] and result.destroyed == []
        reports = [r for r in caplog.records if "without a cluster tag" in r.getMessage()]
        assert len(reports) == 1
        assert metrics.registry.get_sample_value("llmsafespaces_relay_unclaimed_vms") == 1
    assert legacy in aws.live_ids() and aws.calls_of("destroy") == []
    aws.vm(legacy).terminated_at = clock()
    await detector.sweep()
    assert metrics.registry.get_sample_value("llmsafespaces_relay_unclaimed_vms") == 0
