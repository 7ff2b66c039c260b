"""A relay VM that served and then stays unhealthy is replaced, end to end: the fake cloud,
the fake router's health, the API (status, token Secret, peers ConfigMap, Events).

unhealthy → replacement launched beside it → replacement healthy → old VM retired, with the
surge bound and the healthy minimum respected, one Event and one metric per replacement, and
every VM booting with a token of its own.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from controller.relay.drivers.fake import FakeCloud
from controller.relay.metrics import RelayMetrics
from controller.relay.peers import PEERS_CONFIGMAP
from controller.relay.tokens import read_tokens
from tests.controller.fakerouter import FakeRouterState
from tests.controller.relay.conftest import AWS_SLOT, OCI_SLOT, Fleet, build_fleet
from tests.kubeapi import KubeServer
from tests.kubeapi.kinds import CHART_CRDS
from tests.support.clock import FakeClock
from wspin.core.errors import TransientError
from wspin.core.kinds import CONFIGMAPS, EVENTS, NAMESPACES
from wspin.kube.client import Kube

TIMEOUT = {"replacementTimeout": "10m"}


async def _serving(fleet: Fleet, *slots: dict[str, Any], **health: Any) -> list[dict[str, Any]]:
    """A fleet whose every VM serves."""
    await fleet.create(*slots, healthCheck=TIMEOUT | health)
    await fleet.reconcile()
    for instance in await fleet.instances():
        fleet.report(instance["id"], healthy=True)
    await fleet.reconcile()
    return await fleet.instances()


async def _peers(fleet: Fleet) -> list[dict[str, Any]]:
    peers = await fleet.kube.get(CONFIGMAPS, PEERS_CONFIGMAP, fleet.namespace)
    relays: list[dict[str, Any]] = json.loads(peers["data"]["peers.json"])["relays"]
    return relays


async def _events(fleet: Fleet, reason: str) -> list[dict[str, Any]]:
    listing = await fleet.kube.list(EVENTS, "default")
    return [
        e
        for e in listing.get("items", [])
        if e.get("reason") == reason and e["involvedObject"]["name"] == fleet.name
    ]


def _sample(fleet: Fleet, name: str, **labels: str) -> float:
    return fleet.deps.metrics.registry.get_sample_value(name, labels) or 0.0


async def test_an_unhealthy_vm_is_replaced_beside_itself_then_retired(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    [old] = await _serving(fleet, AWS_SLOT)
    cloud = fleet.clouds["aws"]
    fleet.report(old["id"], healthy=False)
    await fleet.reconcile()
    [unhealthy] = await fleet.instances()
    assert unhealthy["state"] == "unhealthy" and unhealthy["unhealthySince"]

    fleet.clock.advance(9 * 60)
    await fleet.reconcile()
    assert cloud.live_ids() == {old["id"]}, "replaced before the timeout"

    fleet.clock.advance(61)
    await fleet.reconcile()
    current, spare = await fleet.instances()
    assert current["id"] == old["id"] and spare["replaces"] == old["id"]
    assert cloud.live_ids() == {old["id"], spare["id"]}
    [launch] = [
        c for c in cloud.calls_of("launch") if c.args["tags"].get("inferencerelay-replaces")
    ]
    assert launch.args["tags"]["inferencerelay-replaces"] == old["id"]
    tokens = await read_tokens(fleet.kube, fleet.namespace)
    assert set(tokens) == {"aws", "aws.2"} and tokens["aws"] != tokens["aws.2"]
    assert cloud.token_of(spare["id"]) == tokens["aws.2"]
    assert tokens["aws.2"] not in launch.args["user_data_decoded"]
    peers = {p["id"]: p["token"] for p in await _peers(fleet)}
    assert peers == {old["id"]: tokens["aws"], spare["id"]: tokens["aws.2"]}
    [started] = await _events(fleet, "RelayReplacing")
    assert started["type"] == "Warning" and old["id"] in started["message"]
    assert spare["id"] in started["message"] and "replacementTimeout" in started["message"]
    assert tokens["aws"] not in json.dumps(started) and tokens["aws.2"] not in json.dumps(started)
    assert (
        _sample(fleet, "llmsafespaces_relay_replacements_total", provider="aws", mode="surge") == 1
    )
    assert _sample(fleet, "llmsafespaces_relay_replacing", provider="aws") == 1
    degraded = await fleet.condition("Degraded")
    assert degraded["status"] == "True" and "replacement provisioning" in degraded["message"]

    fleet.report(spare["id"], healthy=True)
    await fleet.reconcile()
    [taken] = await fleet.instances()
    assert taken["id"] == spare["id"] and "replaces" not in taken
    assert taken["tokenKey"] == "aws.2"
    assert cloud.live_ids() == {spare["id"]}
    assert set(await read_tokens(fleet.kube, fleet.namespace)) == {"aws.2"}
    assert [(p["id"], p["token"]) for p in await _peers(fleet)] == [(spare["id"], tokens["aws.2"])]
    [completed] = await _events(fleet, "RelayReplaced")
    assert completed["type"] == "Normal" and spare["id"] in completed["message"]
    rotations = _sample(
        fleet, "llmsafespaces_relay_rotation_total", provider="aws", reason="unhealthy"
    )
    assert rotations == 1
    assert _sample(fleet, "llmsafespaces_relay_replacing", provider="aws") == 0
    assert (await fleet.condition("Ready"))["reason"] == "AllRelaysHealthy"

    before = (await fleet.get())["metadata"]["resourceVersion"]
    await fleet.reconcile()
    assert (await fleet.get())["metadata"]["resourceVersion"] == before
    assert len(await _events(fleet, "RelayReplacing")) == 1
    logged = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records)
    assert "replacing unhealthy relay VM" in logged
    assert tokens["aws"] not in logged and tokens["aws.2"] not in logged


async def test_the_next_replacement_of_the_slot_takes_the_key_the_slot_no_longer_holds(
    fleet: Fleet,
) -> None:
    [first] = await _serving(fleet, AWS_SLOT)
    for _ in range(2):
        [current] = await fleet.instances()
        fleet.report(current["id"], healthy=False)
        await fleet.reconcile()
        fleet.clock.advance(11 * 60)
        await fleet.reconcile()
        _, spare = await fleet.instances()
        fleet.report(spare["id"], healthy=True)
        await fleet.reconcile()
    [last] = await fleet.instances()
    assert last["id"] != first["id"] and last.get("tokenKey", "aws") == "aws"
    assert set(await read_tokens(fleet.kube, fleet.namespace)) == {"aws"}
    assert len(fleet.clouds["aws"].calls_of("launch")) == 3


async def test_only_max_surge_replacements_run_at_once(fleet: Fleet) -> None:
    aws_vm, oci_vm = await _serving(fleet, AWS_SLOT, OCI_SLOT, maxSurge=1)
    fleet.report(aws_vm["id"], healthy=False)
    fleet.report(oci_vm["id"], healthy=False)
    await fleet.reconcile()
    fleet.clock.advance(11 * 60)
    await fleet.reconcile()
    entries = await fleet.instances()
    spares = [e for e in entries if e.get("replaces")]
    assert len(spares) == 1
    assert len(fleet.clouds["aws"].live_ids()) + len(fleet.clouds["oci"].live_ids()) == 3
    held = await fleet.condition("Degraded")
    assert "spec.healthCheck.maxSurge is 1" in held["message"]

    fleet.report(spares[0]["id"], healthy=True)
    await fleet.reconcile()  # the first one completes
    await fleet.reconcile()  # and the second starts
    assert len([e for e in await fleet.instances() if e.get("replaces")]) == 1
    assert len(await _events(fleet, "RelayReplacing")) == 2


async def test_without_surge_the_unhealthy_vm_goes_first_one_slot_at_a_time(fleet: Fleet) -> None:
    aws_vm, oci_vm = await _serving(fleet, AWS_SLOT, OCI_SLOT, maxSurge=0)
    fleet.report(aws_vm["id"], healthy=False)
    fleet.report(oci_vm["id"], healthy=False)
    await fleet.reconcile()
    fleet.clock.advance(11 * 60)
    await fleet.reconcile()
    live = fleet.clouds["aws"].live_ids() | fleet.clouds["oci"].live_ids()
    assert len(live) == 2, "maxSurge 0 never runs more VMs than slots"
    replaced = {aws_vm["id"], oci_vm["id"]} - live
    assert len(replaced) == 1
    assert (
        sum(
            _sample(fleet, "llmsafespaces_relay_replacements_total", provider=p, mode="in_place")
            for p in ("aws", "oci")
        )
        == 1
    )
    [event] = await _events(fleet, "RelayReplacing")
    assert "maxSurge 0" in event["message"]


async def test_a_recovered_vm_is_kept_when_retiring_it_would_break_the_minimum(
    fleet: Fleet,
) -> None:
    aws_vm, oci_vm = await _serving(fleet, AWS_SLOT, OCI_SLOT, minHealthy=2)
    fleet.report(aws_vm["id"], healthy=False)
    fleet.report(oci_vm["id"], healthy=False)
    await fleet.reconcile()
    fleet.clock.advance(11 * 60)
    await fleet.reconcile()
    spare = next(e for e in await fleet.instances() if e.get("replaces"))
    old = spare["replaces"]
    fleet.report(old, healthy=True)  # came back while its replacement booted
    fleet.report(spare["id"], healthy=True)
    await fleet.reconcile()
    ids = {e["id"] for e in await fleet.instances()}
    assert {old, spare["id"]} <= ids, "the healthy count would have dropped below 2"
    assert old in (fleet.clouds["aws"].live_ids() | fleet.clouds["oci"].live_ids())
    ready = await fleet.condition("Ready")
    assert ready["status"] == "True"
    other = next(vm for vm in (aws_vm, oci_vm) if vm["id"] != old)
    fleet.report(other["id"], healthy=True)
    await fleet.reconcile()
    assert old not in {e["id"] for e in await fleet.instances()}


async def test_ready_follows_the_healthy_minimum(fleet: Fleet) -> None:
    aws_vm, _ = await _serving(fleet, AWS_SLOT, OCI_SLOT, minHealthy=2)
    assert (await fleet.condition("Ready"))["status"] == "True"
    fleet.report(aws_vm["id"], healthy=False)
    await fleet.reconcile()
    ready = await fleet.condition("Ready")
    assert (ready["status"], ready["reason"]) == ("False", "BelowMinimum")
    assert "minHealthy is 2" in ready["message"]
    registry = fleet.deps.metrics.registry
    assert registry.get_sample_value("llmsafespaces_relay_healthy_replicas") == 1


async def test_a_crd_older_than_the_controller_is_named_not_silently_pruned(
    tmp_path: Path,
    clock: FakeClock,
    aws: FakeCloud,
    oci: FakeCloud,
    router: tuple[FakeRouterState, str],
    metrics: RelayMetrics,
) -> None:
    """A cluster whose InferenceRelay CRD predates replacements prunes ``replaces`` from
    status: the pass fails loudly with the fix, and the VM it launched stays in status."""
    current = (CHART_CRDS / "inferencerelays.llmsafespaces.dev.yaml").read_text()
    old = current.replace("                      replaces:\n", "                      replaced:\n")
    assert old != current
    (tmp_path / "inferencerelays.yaml").write_text(old)
    async with KubeServer(crd_files=[tmp_path / "inferencerelays.yaml"]) as server:
        configuration = client.Configuration()
        configuration.host = server.url
        api = client.ApiClient(configuration)
        try:
            kube = Kube(api)
            await kube.create(NAMESPACES, {"metadata": {"name": "relay-ns"}})
            fleet = build_fleet(kube, "relay-ns", clock, {"aws": aws, "oci": oci}, router, metrics)
            [old_vm] = await _serving(fleet, AWS_SLOT)
            fleet.report(old_vm["id"], healthy=False)
            await fleet.reconcile()
            clock.advance(11 * 60)
            with pytest.raises(TransientError, match="replaces") as failure:
                await fleet.reconcile()
            assert "kubectl apply --server-side" in failure.value.fix
            assert len(await fleet.instances()) == 2
            await fleet.reconcile()  # again: nothing dropped, nothing launched twice
            assert len(await fleet.instances()) == 2
            assert "charts/wspin/crds/" in (await fleet.condition("Degraded"))["message"]
            assert len(aws.calls_of("launch")) == 2
        finally:
            await api.close()
